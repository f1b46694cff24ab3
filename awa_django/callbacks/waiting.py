"""The worker's side of callbacks: registering, parking and sequential waits.

``CallbackHub`` belongs to one worker process; ``AttemptCallbacks`` is what a running handler's
``JobContext`` calls. Everything runs on the worker's event loop and connection pool: a sync
handler's calls are handed to the loop and waited for in the handler's thread.

A sequential wait polls its callback once, then sleeps until the owning worker hears
``NOTIFY awa_callback`` (sent when a resume commits) or ``awa_cancel`` (the attempt was closed),
or until the poll interval passes: a lost notification only delays the wake-up. A worker that
is stopping ends its waits with ``CallbackError``, so their jobs retry instead of idling until
their callbacks time out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any, Protocol, TypeVar

from psycopg_pool import AsyncConnectionPool

from awa_django.callbacks.external import seconds, status_error
from awa_django.callbacks.tokens import describe, format_token, new_callback, parse_token
from awa_django.core.claimed_job import ClaimedJob
from awa_django.core.events import wait_for_any
from awa_django.core.handler_result import HandlerResult
from awa_django.exceptions import CallbackError, InvalidCallback, StaleCallback, WaitForCallback
from awa_django.logs import job_extra
from awa_django.storage.callbacks import (
    CallbackRef,
    park_callback,
    register_callback,
    take_callback_payload,
)
from awa_django.storage.statement import run_async

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Deadline(Protocol):
    """The running attempt's deadline, kept by the worker (``worker.deadline``): paused while a
    callback is registered, whose own timeout governs the attempt then, and started afresh when
    the callback resumes it (as its lease's ``deadline_at`` is)."""

    def pause(self) -> None: ...

    def restart(self) -> None: ...


class CallbackHub:
    """Callbacks of the attempts one worker runs, and the wake-ups of their sequential waits."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        *,
        loop: asyncio.AbstractEventLoop,
        claimed_by: str,
        poll_interval_s: float,
        stopping: asyncio.Event,
    ) -> None:
        self.pool = pool
        self.loop = loop
        self.claimed_by = claimed_by
        self.poll_interval_s = poll_interval_s
        self.stopping = stopping
        self._wakeups: dict[tuple[int, int], asyncio.Event] = {}

    def wake(self, job_id: int, run_lease: int) -> None:
        """A resume committed for this attempt, or it was closed: re-check its wait now."""
        event = self._wakeups.get((job_id, run_lease))
        if event is not None:
            event.set()

    def wake_all(self) -> None:
        """Re-check every wait now: resumes may have committed while no notification could
        reach this worker (its LISTEN connection was down)."""
        for event in self._wakeups.values():
            event.set()

    def subscribe(self, job_id: int, run_lease: int) -> asyncio.Event:
        event = self._wakeups[(job_id, run_lease)] = asyncio.Event()
        return event

    def unsubscribe(self, job_id: int, run_lease: int) -> None:
        self._wakeups.pop((job_id, run_lease), None)

    async def park(self, job: ClaimedJob, outcome: WaitForCallback) -> HandlerResult | None:
        """Park ``job``'s attempt on the callback ``outcome`` names. None: parked, or already
        resolved by the outside system; nothing more to write. Otherwise the handler returned a
        token that is not waiting on this attempt, and the result closes it as an error."""
        try:
            ref = _own(parse_token(outcome.token), job.job_id, job.run_lease)
        except CallbackError as exc:
            return HandlerResult(InvalidCallback(f"WaitForCallback: {exc}"))
        try:
            async with self.pool.connection() as conn:
                status = await run_async(conn, park_callback(ref))
        except Exception:
            # Still registered, so the callback timeout rescues it if the outside never answers.
            logger.exception("parking failed job_id=%s", job.job_id, extra=job_extra(job))
            return None
        if status == "waiting" or status.startswith("closed:"):
            return None
        if status == "resumed":
            return HandlerResult(
                StaleCallback(
                    f"WaitForCallback on a {describe(ref)} that was resumed: resume_external is "
                    "for ctx.wait_for_callback; resolve parked callbacks with complete_external"
                )
            )
        return HandlerResult(InvalidCallback(f"WaitForCallback: {status_error(status, ref)}"))


def _own(ref: CallbackRef, job_id: int, run_lease: int) -> CallbackRef:
    if (ref.job_id, ref.run_lease) != (job_id, run_lease):
        raise InvalidCallback(f"the token names another attempt ({describe(ref)})")
    return ref


class AttemptCallbacks:
    """Callbacks of one running attempt (``JobContext`` delegates to this)."""

    def __init__(
        self, hub: CallbackHub, job_id: int, run_lease: int, deadline: Deadline | None = None
    ) -> None:
        self._hub = hub
        self._job_id = job_id
        self._run_lease = run_lease
        self._deadline = deadline

    async def register(self, timeout: timedelta | float) -> str:
        timeout_s = seconds(timeout, name="timeout", allow_zero=False)
        ref = new_callback(self._job_id, self._run_lease)
        async with self._hub.pool.connection() as conn:
            timeout_at = await run_async(
                conn, register_callback(ref, timeout_s=timeout_s, claimed_by=self._hub.claimed_by)
            )
        if timeout_at is None:
            raise StaleCallback(f"cannot register a callback: {describe(ref)} is already closed")
        if self._deadline is not None:
            self._deadline.pause()
        return format_token(ref)

    async def wait(self, token: str) -> Any:
        ref = _own(parse_token(token), self._job_id, self._run_lease)
        wakeup = self._hub.subscribe(ref.job_id, ref.run_lease)
        try:
            while True:
                # Cleared before the poll: a NOTIFY landing during it wakes the next sleep.
                wakeup.clear()
                async with self._hub.pool.connection() as conn:
                    status, payload = await run_async(conn, take_callback_payload(ref))
                if status == "resumed":
                    if self._deadline is not None:
                        self._deadline.restart()
                    return payload
                if status != "waiting":
                    raise status_error(status, ref)
                if self._hub.stopping.is_set():
                    # Waiting out the shutdown timeout would only end in an abandoned attempt
                    # that sits until its callback times out; failing now retries it promptly.
                    raise CallbackError(f"worker stopping: gave up waiting for the {describe(ref)}")
                await wait_for_any(wakeup, self._hub.stopping, timeout=self._hub.poll_interval_s)
        finally:
            self._hub.unsubscribe(ref.job_id, ref.run_lease)

    def run_sync(self, make: Callable[[], Coroutine[Any, Any, T]], *, async_name: str) -> T:
        """Run ``make()`` on the worker loop from a sync handler's thread and wait for it."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._hub.loop:
            raise RuntimeError(f"this blocks the worker loop: use 'await ctx.{async_name}(...)'")
        return asyncio.run_coroutine_threadsafe(make(), self._hub.loop).result()
