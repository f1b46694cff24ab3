"""Per-process heartbeats: one statement keeps every long-running attempt of this worker alive.

Every ``interval_s`` the heartbeat collects the attempts that have run for at least one interval
(short attempts never need one: their receipt is their liveness until the staleness window) and
those whose handler reported progress since the last beat, and sends them in one batch. Storage
answers which of them are still open; an attempt that is not was closed under us (rescued or
cancelled), so its cancel flag is raised and its late result will be stale. A batch the
database refuses for the progress or checkpoint of some attempts is split down to those
(``worker.isolation``): each is closed as failed through the completer, and its cancel flag
raised; the other attempts' heartbeats are written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool

from awa_django.core.completion import result_to_completion
from awa_django.core.handler_result import HandlerResult
from awa_django.core.retry import RetryPolicy
from awa_django.exceptions import UnstorableAttempt
from awa_django.logs import job_extra
from awa_django.storage.execution import LiveAttempt, heartbeat_attempts
from awa_django.storage.statement import run_async
from awa_django.worker.completer import Completer
from awa_django.worker.dispatcher import ExecutingAttempt
from awa_django.worker.isolation import refusal_reason, write_apart
from awa_django.worker.service import Loop

logger = logging.getLogger(__name__)

# One attempt in a heartbeat batch, and what is sent for it.
Beat = tuple[ExecutingAttempt, LiveAttempt]


class Heartbeat(Loop):
    """Heartbeats the attempts ``running()`` yields, every ``interval_s``."""

    name = "heartbeat"

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        running: Callable[[], Iterable[ExecutingAttempt]],
        *,
        interval_s: float,
        claimed_by: str,
        completer: Completer,
        policy: RetryPolicy,
        now: Callable[[], datetime],
    ) -> None:
        self._pool = pool
        self._running = running
        self._interval_s = interval_s
        self._claimed_by = claimed_by
        # Attempts whose progress or checkpoint the database refuses are closed through these.
        self._completer = completer
        self._policy = policy
        self._now = now

    async def run(self, stopped: asyncio.Event) -> None:
        while not stopped.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopped.wait(), timeout=self._interval_s)
            if stopped.is_set():
                return
            try:
                await self.beat_once()
            except Exception:
                logger.exception("heartbeat failed")

    async def beat_once(self) -> int:
        """Send one heartbeat batch; returns how many attempts it covered. A failure that is not
        about one attempt's progress (a transient one, or a database that refuses every
        heartbeat) is raised once what did land is accounted for: the next beat tries again,
        with the unwritten progress."""
        now = time.monotonic()
        batch: list[Beat] = []
        for attempt in self._running():
            progress, checkpoint, changed = attempt.ctx.state.take_unflushed()
            if not changed and now - attempt.started < self._interval_s:
                continue
            live = LiveAttempt.of(
                attempt.job,
                progress=progress if changed else None,
                checkpoint=checkpoint if changed else None,
            )
            batch.append((attempt, live))
        if not batch:
            return 0
        split = await write_apart(batch, self._send)
        written, unwritten, error = split.written, split.unwritten, split.error
        if split.refused:
            landed, failed, bare_error = await self._without_progress(split.refused)
            written += landed
            unwritten += failed
            error = error or bare_error
        for beats, still_open in written:
            for attempt, live in beats:
                if (live.job_id, live.run_lease) not in still_open:
                    logger.warning(
                        "attempt closed elsewhere, cancelling job_id=%s run_lease=%s",
                        live.job_id,
                        live.run_lease,
                    )
                    attempt.ctx.cancel_flag.set()
        if error is not None:
            for attempt, live in unwritten:
                if live.progress is not None or live.checkpoint is not None:
                    attempt.ctx.state.mark_unflushed()
            raise error
        return len(batch)

    async def _without_progress(
        self, refused: list[tuple[Beat, Exception]]
    ) -> tuple[list[tuple[list[Beat], set[tuple[int, int]]]], list[Beat], Exception | None]:
        """Send the beats the database refused again, without what their handlers reported.
        Those that land had their progress or checkpoint refused: their attempts are ended.
        Returns the writes that landed, the (original) beats still not written, and why: one
        refused even bare means the database refuses every heartbeat (say, a permission)."""
        original = {id(beat[0]): (beat, exc) for beat, exc in refused}
        bare = [(attempt, LiveAttempt.of(attempt.job)) for (attempt, _), _ in refused]
        again = await write_apart(bare, self._send)
        for beats, still_open in again.written:
            for attempt, live in beats:
                if (live.job_id, live.run_lease) in still_open:
                    self._end(attempt, original[id(attempt)][1])
        failed = [*again.unwritten, *(beat for beat, _ in again.refused)]
        error = again.error or next((exc for _, exc in again.refused), None)
        return again.written, [original[id(attempt)][0] for attempt, _ in failed], error

    async def _send(self, beats: list[Beat]) -> set[tuple[int, int]]:
        async with self._pool.connection() as conn:
            return await run_async(
                conn,
                heartbeat_attempts([live for _, live in beats], claimed_by=self._claimed_by),
            )

    def _end(self, attempt: ExecutingAttempt, exc: Exception) -> None:
        """Close ``attempt``, whose progress or checkpoint the database refused, as failed with
        the reason (it retries or fails by its policy), and ask its handler to stop."""
        job = attempt.job
        reason = refusal_reason(exc)
        logger.error(
            "progress refused by the database, closing the attempt as failed "
            "job_id=%s run_lease=%s reason=%s",
            job.job_id,
            job.run_lease,
            reason,
            extra=job_extra(job),
        )
        error = UnstorableAttempt(
            f"the database refused to store this attempt's progress or checkpoint: {reason}"
        )
        self._completer.supersede(
            result_to_completion(job, HandlerResult(error), now=self._now(), policy=self._policy)
        )
        attempt.ctx.cancel_flag.set()
