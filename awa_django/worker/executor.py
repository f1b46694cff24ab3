"""Runs one claimed job and turns what happened into a ``Completion``.

``execute`` calls the handler (async on the loop, sync in the worker's thread pool with Django's
connection hygiene around it) and captures its result as a ``HandlerResult``.
``result_to_completion`` is the pure mapping from that result to a storage transition, including
retry backoff; it is tested without a database.
"""

from __future__ import annotations

import asyncio
import contextvars
import random
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from asgiref.sync import async_to_sync
from django.db import close_old_connections

from awa_django.conf import AwaSettings
from awa_django.exact_json import storable_text, to_json_text
from awa_django.exceptions import (
    Cancel,
    InvalidJob,
    InvalidReturnValue,
    JobOutcome,
    RetryAfter,
    Snooze,
    TerminalError,
    UnknownJobKind,
)
from awa_django.jobs import AttemptProgress, Job, JobContext
from awa_django.storage.execution import Attempt, Completion, Outcome
from awa_django.storage.queue import ClaimedJob
from awa_django.worker.handler_threads import HandlerThreads

if TYPE_CHECKING:
    from awa_django.callbacks.waiting import AttemptCallbacks

TRACEBACK_LINES: Final = 20
# Largest return value (JSON text, UTF-8 bytes) a job may keep: results live in the done row,
# which every read of the job loads, so big payloads belong in the caller's own storage.
MAX_RESULT_BYTES: Final = 64 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Exponential backoff with jitter: min(base * 2**(attempt-1), max) + up to jitter * that."""

    base_s: float
    max_s: float
    jitter: float

    @classmethod
    def from_settings(cls, conf: AwaSettings) -> RetryPolicy:
        return cls(
            base_s=conf.RETRY_BACKOFF_BASE_S,
            max_s=conf.RETRY_BACKOFF_MAX_S,
            jitter=conf.RETRY_JITTER,
        )

    def backoff_seconds(self, attempt: int, rng: Callable[[], float]) -> float:
        delay = min(self.base_s * 2.0 ** max(attempt - 1, 0), self.max_s)
        return delay + delay * self.jitter * rng()


@dataclass(frozen=True, slots=True)
class HandlerResult:
    """What a handler did: returned (``error`` is None) or raised/returned an outcome or error."""

    error: BaseException | None = None
    # The return value to keep with the completed job, as JSON text (see ``StoredReturn``).
    result_json: str | None = None


@dataclass(frozen=True, slots=True)
class StoredReturn:
    """Returned by a handler whose return value must be kept with the job (django.tasks).

    Build it with ``StoredReturn.of(value)``: the value is checked once, in the handler, so an
    unstorable value fails the attempt like any other error. A plain ``@awa.job`` handler's
    return value other than None is turned into one by ``kept_return`` as it returns.
    """

    json: str

    @classmethod
    def of(cls, value: object) -> StoredReturn:
        """``value`` as JSON text within ``MAX_RESULT_BYTES``, else ``InvalidReturnValue``."""
        try:
            text = to_json_text(value, field="return value")
        except InvalidJob as exc:
            raise InvalidReturnValue(str(exc)) from None
        size = len(text.encode())
        if size > MAX_RESULT_BYTES:
            raise InvalidReturnValue(
                f"return value is {size} bytes of JSON, over the {MAX_RESULT_BYTES}-byte cap; "
                "store large results yourself and return a reference to them"
            )
        return cls(text)


def kept_return(value: object, ctx: JobContext) -> object:
    """What a handler returned other than None, with a plain value (not an outcome) made a
    ``StoredReturn``. Called where the handler ran (its thread, or the loop for an async one),
    so a value too large or not exactly JSON fails that attempt alone, terminally: running the
    handler again would return the same value. The callers test for None, the common case,
    themselves: a comparison costs a completion less than a call."""
    if isinstance(value, JobOutcome | StoredReturn):
        return value
    try:
        return StoredReturn.of(value)
    except InvalidReturnValue as exc:
        raise InvalidReturnValue(f"job {ctx.job_id} ({ctx.kind}): {exc}") from None


def context_for(job: ClaimedJob, *, callbacks: AttemptCallbacks | None = None) -> JobContext:
    """The ``JobContext`` of a claimed job's attempt (``callbacks`` from the worker running it)."""
    return JobContext(
        job_id=job.job_id,
        kind=job.kind,
        queue=job.queue,
        priority=job.priority,
        attempt=job.attempt,
        max_attempts=job.max_attempts,
        run_lease=job.run_lease,
        args=job.args,
        metadata=job.metadata,
        tags=tuple(job.tags),
        created_at=job.created_at,
        state=AttemptProgress(job.progress, job.checkpoint),
        callbacks=callbacks,
    )


def error_entry(exc: BaseException, *, attempt: int, at: datetime) -> dict[str, Any]:
    """One attempt's error as stored in the job's ``errors`` list."""
    lines = traceback.format_exception(exc)
    return {
        "attempt": attempt,
        "at": at.isoformat(),
        "type": storable_text(f"{type(exc).__module__}.{type(exc).__qualname__}"),
        "message": storable_text(_message(exc)),
        "traceback": storable_text("".join(lines[-TRACEBACK_LINES:])),
    }


def _message(exc: BaseException) -> str:
    # An exception whose __str__ raises must still close its attempt (traceback formatting
    # copes with it the same way).
    try:
        return str(exc)
    except Exception:
        return f"<{type(exc).__qualname__}: str() failed>"


def result_to_completion(
    job: Attempt,
    result: HandlerResult,
    *,
    now: datetime,
    policy: RetryPolicy,
    rng: Callable[[], float] = random.random,
    progress: dict[str, Any] | None = None,
    checkpoint: dict[str, Any] | None = None,
) -> Completion:
    """Map a handler result to the storage transition that closes the attempt.

    ``now`` dates the error entries; when a retried or snoozed job runs again is a delay, which
    the database adds to its own clock. ``progress``/``checkpoint`` are what the attempt
    reported and not yet flushed; they are saved for the next attempt unless the job completed
    (success clears them).
    """
    exc = result.error
    if exc is None:
        # Success clears progress and checkpoint. First and without the helper below: this is
        # the path nearly every attempt takes.
        return Completion.of(job, Outcome.COMPLETED, result_json=result.result_json)

    def close(
        outcome: Outcome, *, delay_s: float | None = None, error: dict[str, Any] | None = None
    ) -> Completion:
        return Completion.of(
            job, outcome, delay_s=delay_s, error=error, progress=progress, checkpoint=checkpoint
        )

    if isinstance(exc, Snooze):
        return close(Outcome.SNOOZED, delay_s=exc.seconds)
    if isinstance(exc, Cancel):
        return close(
            Outcome.CANCELLED,
            error={
                "attempt": job.attempt,
                "at": now.isoformat(),
                "reason": storable_text(str(exc.reason)),
            },
        )
    error = error_entry(exc, attempt=job.attempt, at=now)
    if isinstance(exc, TerminalError | UnknownJobKind):
        return close(Outcome.FAILED, error=error)
    if job.attempt >= job.max_attempts:
        return close(Outcome.FAILED, error=error)
    if isinstance(exc, RetryAfter):
        return close(Outcome.RETRYABLE, delay_s=exc.seconds, error=error)
    return close(Outcome.RETRYABLE, delay_s=policy.backoff_seconds(job.attempt, rng), error=error)


def _run_sync(func: Callable[..., Any], ctx: JobContext, args: dict[str, Any]) -> Any:
    # Each sync job gets Django's per-request connection hygiene: stale or broken connections
    # from an earlier job on this thread are closed before, and expired ones after.
    close_old_connections()
    try:
        value = func(ctx, **args)
        return value if value is None else kept_return(value, ctx)
    finally:
        close_old_connections()


def _unknown_kind(job: ClaimedJob) -> HandlerResult:
    return HandlerResult(
        UnknownJobKind(f"unknown job kind {job.kind!r}: no handler registered in this worker")
    )


def _returned(value: object) -> HandlerResult:
    if isinstance(value, JobOutcome):
        return HandlerResult(value)
    if isinstance(value, StoredReturn):
        return HandlerResult(result_json=value.json)
    return HandlerResult()


def stops_the_attempt(exc: BaseException) -> bool:
    """Whether ``exc``, raised where a handler runs, ends the attempt without a result instead of
    failing it: the cancellation of a job's task by the worker (an attempt abandoned at the
    shutdown timeout, left open for rescue) and GeneratorExit, with which Python closes a
    coroutine. Anything else a handler raises, ``KeyboardInterrupt``, ``SystemExit`` or a
    ``CancelledError`` of its own included, fails its attempt: none may end the worker."""
    if isinstance(exc, GeneratorExit):
        return True
    if not isinstance(exc, asyncio.CancelledError):
        return False
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def execute(
    job: ClaimedJob, handler: Job[Any, Any] | None, ctx: JobContext, threads: HandlerThreads
) -> HandlerResult:
    """Run the handler for ``job``; never raises, except when the worker cancels its task."""
    if handler is None:
        return _unknown_kind(job)
    try:
        if handler.is_async:
            value = await handler.func(ctx, **job.args)
            if value is not None:
                value = kept_return(value, ctx)
        else:
            # The copied context carries the job's span into the thread, so spans the handler
            # (or its instrumented libraries) opens are children of it.
            value = await threads.run(
                contextvars.copy_context().run, _run_sync, handler.func, ctx, job.args
            )
    except BaseException as exc:
        if stops_the_attempt(exc):
            raise
        return HandlerResult(exc)
    return _returned(value)


def execute_inline(
    job: ClaimedJob, handler: Job[Any, Any] | None, ctx: JobContext
) -> HandlerResult:
    """``execute`` in the calling thread, on its Django connection (in-process runs: tests and
    eager mode). Async handlers run through ``async_to_sync``, whose ``sync_to_async`` ORM calls
    come back to this thread. No connection hygiene: the caller owns the connection."""
    if handler is None:
        return _unknown_kind(job)
    try:
        if handler.is_async:
            value = async_to_sync(handler.func)(ctx, **job.args)
        else:
            value = handler.func(ctx, **job.args)
        if value is not None:
            value = kept_return(value, ctx)
    except Exception as exc:
        return HandlerResult(exc)
    return _returned(value)
