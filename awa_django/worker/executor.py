"""Runs one claimed job and captures what happened as a ``HandlerResult``.

``execute`` calls the handler (async on the loop, sync in the worker's thread pool with Django's
connection hygiene around it); ``awa_django.core.completion.result_to_completion`` turns its
result into the storage transition that closes the attempt.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from asgiref.sync import async_to_sync, sync_to_async
from django.db import close_old_connections, connections

from awa_django.conf import get_settings
from awa_django.core.claimed_job import ClaimedJob
from awa_django.core.handler_result import HandlerResult, StoredReturn, kept_return
from awa_django.core.unknown_kinds import unknown_kind
from awa_django.declarations.exact_json import exact_text
from awa_django.declarations.jobs import (
    AttemptContext,
    AttemptProgress,
    DeclaredJob,
    JobContext,
)
from awa_django.declarations.workflow_steps import added_step_spec
from awa_django.exceptions import DeadlineExceeded, JobOutcome
from awa_django.storage import workflows as workflow_storage
from awa_django.storage.statement import run
from awa_django.worker.deadline import AttemptDeadline
from awa_django.worker.handler_threads import HandlerThreads
from awa_django.worker.interrupt import InterruptibleCall

if TYPE_CHECKING:
    from awa_django.callbacks.waiting import AttemptCallbacks


def context_for(
    job: ClaimedJob, *, claimed_by: str | None = None, callbacks: AttemptCallbacks | None = None
) -> JobContext:
    """The ``JobContext`` of a claimed job's attempt (``claimed_by``, the claimant's id, and
    ``callbacks`` from the worker running it)."""
    return AttemptContext(
        job.job_id,
        job.kind,
        job.queue,
        job.priority,
        job.attempt,
        job.max_attempts,
        job.run_lease,
        job.args,
        job.metadata,
        tuple(job.tags),
        job.created_at,
        claimed_by,
        job.claimed_at,
        AttemptProgress(job.progress, job.checkpoint),
        callbacks,
        added_step_spec,
        _read_step_inputs,
    )


def _read_step_inputs(
    workflow_id: int, step: str
) -> tuple[tuple[str, ...], dict[str, dict[str, Any]]]:
    # On the thread running the handler (a sync one's, or the ORM thread for an async one:
    # ``execute`` reads them there first), with that thread's connection.
    with connections[get_settings().DATABASE_ALIAS].cursor() as cursor:
        return run(cursor, workflow_storage.step_inputs(workflow_id, step))


# Per handler thread: whether the check after its last job left a Django connection open.
_thread_state = threading.local()


def _run_sync(
    func: Callable[..., Any],
    ctx: JobContext,
    args: dict[str, Any],
    call: InterruptibleCall | None,
) -> Any:
    # Each sync job gets Django's per-request connection hygiene (``close_old_connections``
    # before and after, as around a request), without its check before the job when there is
    # nothing to check: the check after the thread's last job closed every connection it used
    # that was broken or expired (with CONN_MAX_AGE = 0, every one), and only a connection it
    # left open can expire or be found broken while the thread waits. Each check walks all of
    # Django's aliases through its thread-local lookup, about ten Python calls.
    if getattr(_thread_state, "left_open", False):
        close_old_connections()
    try:
        value = func(ctx, **args) if call is None else call.run(func, ctx, **args)
        return value if value is None else kept_return(value, ctx)
    finally:
        if call is not None and call.interrupted:
            _forget_connections()
        _thread_state.left_open = _close_old_connections()


def _close_old_connections() -> bool:
    """Django's ``close_old_connections`` for this thread; whether a connection is still open."""
    left_open = False
    for conn in connections.all(initialized_only=True):
        conn.close_if_unusable_or_obsolete()
        left_open = left_open or conn.connection is not None
    return left_open


def _forget_connections() -> None:
    """Close this thread's Django connections and drop their wrappers: a handler stopped at its
    deadline may have been stopped inside a query or an ``atomic`` block, and the next job on
    this thread must not inherit what it left half done."""
    for conn in connections.all(initialized_only=True):
        conn.close()
        del connections[conn.alias]


def _unknown_kind(job: ClaimedJob) -> HandlerResult:
    # Not a failure of the job: it waits for a worker that knows its kind
    # (awa_django.core.unknown_kinds).
    return HandlerResult(unknown_kind(job.kind, job.errors))


# What nearly every handler's attempt ends with: shared, as a HandlerResult is immutable.
_RETURNED_NOTHING: Final = HandlerResult()


def _returned(value: object, ctx: JobContext) -> HandlerResult:
    if value is None and not ctx.workflow_added:
        return _RETURNED_NOTHING
    if isinstance(value, JobOutcome):
        return HandlerResult(value)
    # Workflow steps the handler added (an empty list for nearly every job).
    added = exact_text(ctx.workflow_added) if ctx.workflow_added else None
    if isinstance(value, StoredReturn):
        return HandlerResult(result_json=value.json, added_steps_json=added)
    return HandlerResult(added_steps_json=added)


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
    job: ClaimedJob,
    handler: DeclaredJob[Any, Any] | None,
    ctx: JobContext,
    threads: HandlerThreads,
    deadline: AttemptDeadline | None = None,
) -> HandlerResult:
    """Run the handler for ``job``, stopped at ``deadline`` if it has one; never raises, except
    when the worker cancels its task."""
    if handler is None:
        return _unknown_kind(job)
    try:
        if handler.is_async:
            if ctx.reads_workflow_inputs():
                # A wide fan-in's inputs are a query: off the event loop, before it runs.
                await sync_to_async(ctx.preload_workflow_inputs)()
            # Without a deadline the handler is awaited here: no coroutine of ours around it.
            if deadline is None:
                value = await handler.func(ctx, **job.args)
            else:
                value = await _run_async(handler.func, ctx, job.args, deadline)
            if value is not None:
                value = kept_return(value, ctx)
        else:
            call = None
            if deadline is not None:
                call = InterruptibleCall()
                deadline.start(ctx.cancel_flag, call.interrupt)
            # The copied context carries the job's span into the thread, so spans the handler
            # (or its instrumented libraries) opens are children of it.
            value = await threads.run(
                contextvars.copy_context().run, _run_sync, handler.func, ctx, job.args, call
            )
    except BaseException as exc:
        if stops_the_attempt(exc):
            raise
        if isinstance(exc, DeadlineExceeded) and deadline is not None and deadline.expired:
            # A sync handler's interrupt carries no message: say which deadline it was.
            return HandlerResult(deadline.error(exc))
        return HandlerResult(exc)
    finally:
        if deadline is not None:
            deadline.cancel()
    return _returned(value, ctx)


async def _run_async(
    func: Callable[..., Any],
    ctx: JobContext,
    args: dict[str, Any],
    deadline: AttemptDeadline,
) -> Any:
    # At the deadline the timeout cancels this task where the handler awaits, and turns the
    # cancellation into TimeoutError as it leaves the block.
    timeout = asyncio.timeout(None)
    try:
        async with timeout:
            deadline.start(ctx.cancel_flag, lambda: timeout.reschedule(0))
            return await func(ctx, **args)
    except TimeoutError as exc:
        if timeout.expired():
            raise deadline.error(exc) from None
        raise


def execute_in_calling_thread(
    job: ClaimedJob, handler: DeclaredJob[Any, Any] | None, ctx: JobContext
) -> HandlerResult:
    """``execute`` in the calling thread, on its Django connection (in-process runs: tests and
    eager mode). Async handlers run through ``async_to_sync``, whose ``sync_to_async`` ORM calls
    come back to this thread. No connection hygiene: the caller owns the connection."""
    if handler is None:
        return _unknown_kind(job)
    try:
        # A wide fan-in's inputs are read here, on this thread's connection, not from the
        # event loop async_to_sync runs an async handler on.
        ctx.preload_workflow_inputs()
        if handler.is_async:
            value = async_to_sync(handler.func)(ctx, **job.args)
        else:
            value = handler.func(ctx, **job.args)
        if value is not None:
            value = kept_return(value, ctx)
    except Exception as exc:
        return HandlerResult(exc)
    return _returned(value, ctx)
