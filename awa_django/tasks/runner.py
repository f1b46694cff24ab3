"""The worker side of ``AwaBackend``: turns a ``"django.tasks:<module_path>"`` kind back into a
runnable awa handler.

``resolve`` is the registry's resolver for that prefix (``awa_django.declarations.jobs``). The
handler it builds makes the task's ``TaskResult`` (so ``worker_ids`` already holds this claim and
``TaskContext.attempt`` counts from 1), sends ``task_started``, calls the function (async tasks
on the worker's loop), sends ``task_finished`` and returns the value as a ``StoredReturn`` so the
worker keeps it with the completed job. A result no one would read is not made: when the task
takes no context and a signal's only receivers are the framework's logging ones, whose logger
drops the line, that signal is not sent (``_unheard``).

The result of a job's first claim is made from the attempt's context alone, which holds all it
needs; only a job claimed before (a retry, a snooze, a retry from the DLQ) is read back for its
earlier claims and errors. Reading every job back cost two queries per task on Django's
connection, and with ``CONN_MAX_AGE = 0`` a new database connection per sync task, as the worker
closes a handler thread's connection after each job (docs/benchmarks.md, "django.tasks drain").
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from inspect import iscoroutinefunction
from typing import Any, Final

from django.core.signals import setting_changed
from django.dispatch import Signal, receiver
from django.utils import timezone
from django.utils.module_loading import import_string

from awa_django.core.completion import error_entry
from awa_django.core.handler_result import StoredReturn
from awa_django.declarations.jobs import DeclaredJob, JobContext
from awa_django.declarations.priorities import TASK_KIND_PREFIX
from awa_django.exceptions import Cancel, Snooze, TerminalError
from awa_django.storage.jobs import Claim
from awa_django.tasks.backend import AwaBackend, assembled_result, task_error
from awa_django.tasks.compat import (
    Task,
    TaskContext,
    TaskResult,
    TaskResultStatus,
    log_task_finished,
    log_task_started,
    task_finished,
    task_started,
)
from awa_django.worker.executor import stops_the_attempt

logger = logging.getLogger(__name__)

# The framework's own receivers of the task signals (Django's, or the backport's): each writes a
# log line and nothing else.
_LOGGING_RECEIVERS: Final = frozenset({log_task_started, log_task_finished})
# The logger they write to (the signals module's own), or None if it has none by that name: then
# they are always called.
_signals_logger = vars(sys.modules[log_task_started.__module__]).get("logger")
_LOGGING_RECEIVERS_LOGGER: Final = (
    _signals_logger if isinstance(_signals_logger, logging.Logger) else None
)


def resolve(kind: str) -> DeclaredJob[Any, Any] | None:
    """The handler of a stored ``@task``, or None when its module path does not name one."""
    module_path = kind.removeprefix(TASK_KIND_PREFIX)
    try:
        task = import_string(module_path)
    except Exception:
        # Any import failure (not only ImportError) must reach the job as an unknown kind,
        # never the dispatcher that asked: its jobs wait for a worker that can import it
        # (awa_django.core.unknown_kinds), and a producer refuses to enqueue it.
        logger.exception(
            "cannot import django.tasks task %s: its jobs wait for a worker that can",
            module_path,
        )
        return None
    if not isinstance(task, Task):
        logger.error("%s is not a django.tasks Task", module_path)
        return None
    return DeclaredJob(_handler(task), kind=kind, queue=None, priority=None, max_attempts=None)


# The backend of each alias a handler ran under. Django looks a backend up per thread (and
# per asyncio context) and that lookup was a tenth of what a no-op task cost the worker; the
# backend holds its options only, so the threads can share one. Forgotten when a test changes
# TASKS.
_backends: dict[str, AwaBackend] = {}


@receiver(setting_changed)
def _forget_backends(*, setting: str, **kwargs: Any) -> None:
    if setting == "TASKS":
        _backends.clear()


def _backend(task: Task[Any, Any]) -> AwaBackend:
    cached = _backends.get(task.backend)
    if cached is not None:
        return cached
    backend = task.get_backend()
    if not isinstance(backend, AwaBackend):
        raise TerminalError(
            f"task {task.module_path} is configured on backend {task.backend!r}, which is not "
            "an AwaBackend in this worker's TASKS setting"
        )
    _backends[task.backend] = backend
    return backend


def _stored(value: Any) -> StoredReturn | None:
    """What the worker keeps of a task's return value. None is not stored: a completed job with
    no stored result reads back as ``return_value`` None all the same
    (``AwaBackend.result_from_record``), and storing it made the close of every task that returns
    nothing write a result."""
    return None if value is None else StoredReturn.of(value)


def _first_claim_result(
    backend: AwaBackend, task: Task[Any, Any], ctx: JobContext
) -> TaskResult[Any, Any] | None:
    """The running attempt's ``TaskResult`` when it is the job's first claim (``run_lease`` 1:
    every claim raises it by one), from its context: its one claim is this one and no attempt
    before it failed. None for any other attempt, or a context without its claim."""
    if ctx.run_lease != 1 or ctx.claimed_by is None or ctx.claimed_at is None:
        return None
    return backend.task_result(
        task,
        job_id=ctx.job_id,
        status=TaskResultStatus.RUNNING,
        args=ctx.args,
        metadata=ctx.metadata,
        created_at=ctx.created_at,
        claims=[Claim(claimed_by=ctx.claimed_by, claimed_at=ctx.claimed_at)],
        finished_at=None,
        errors=[],
    )


# Per signal and sender: the entries of ``signal.receivers`` last looked at (held, so none of
# them can be freed and its identity reused), and the receivers to call directly when they were
# only the framework's logging ones (None: the signal's own send).
_direct_receivers: dict[
    tuple[Signal, type[AwaBackend]], tuple[tuple[Any, ...], tuple[Any, ...] | None]
] = {}


def _logging_only(signal: Signal, sender: type[AwaBackend]) -> tuple[Any, ...] | None:
    """The receivers of ``signal`` for ``sender`` when they are only the framework's logging ones,
    which a task's signals can then call directly; None when any other receiver is connected.
    Django works its list out again on every send, a sixth of what a no-op task cost; this
    looks again only when ``signal.receivers`` changed (``connect``/``disconnect`` edit it)."""
    # Compared item by item, identity first: the held entries are these very objects unless a
    # receiver was connected or disconnected since. A receiver that died meanwhile changes
    # nothing: a list with one besides the logging ones was never called directly.
    entries = tuple(signal.receivers)
    seen = _direct_receivers.get((signal, sender))
    if seen is not None and seen[0] == entries:
        return seen[1]
    # Django's own list of them, the one send and asend call.
    sync_receivers, async_receivers = signal._live_receivers(sender)
    direct = (
        None
        if async_receivers or not _LOGGING_RECEIVERS.issuperset(sync_receivers)
        else tuple(sync_receivers)
    )
    _direct_receivers[(signal, sender)] = (entries, direct)
    return direct


def _unheard(signal: Signal, sender: type[AwaBackend], level: int) -> bool:
    """Whether sending ``signal`` would do nothing: its only receivers are the framework's logging
    ones (or none), and their logger drops a line of ``level`` (a success or a retry is logged at
    INFO, a failure at ERROR). A worker rarely logs the framework's INFO lines, and making the
    ``TaskResult`` pair for signals no one hears was most of what a no-op task cost beyond a
    native job (docs/benchmarks.md, "django.tasks drain"); a receiver that is connected, or a
    logger that would write the line, gets the signal as before."""
    direct = _logging_only(signal, sender)
    if direct is None:
        return False
    return not direct or (
        _LOGGING_RECEIVERS_LOGGER is not None and not _LOGGING_RECEIVERS_LOGGER.isEnabledFor(level)
    )


def _finished_level(ctx: JobContext, error: BaseException | None) -> int:
    """The level ``task_finished``'s logging receiver writes the attempt's line at: ERROR for a
    task that ends FAILED, INFO otherwise (see ``_finished``)."""
    return logging.ERROR if error is not None and _final(error, ctx) else logging.INFO


def _send(signal: Signal, sender: type[AwaBackend], result: TaskResult[Any, Any]) -> None:
    """``signal.send`` for a sync task, calling the logging receivers directly when they are all
    there is (``_logging_only``)."""
    direct = _logging_only(signal, sender)
    if direct is None:
        signal.send(sender, task_result=result)
        return
    for log_receiver in direct:
        log_receiver(signal=signal, sender=sender, task_result=result)


async def _asend(signal: Signal, sender: type[AwaBackend], result: TaskResult[Any, Any]) -> None:
    """``signal.asend`` for an async task, without its trip to asgiref's thread when the only
    receivers are the framework's logging ones: those are called here, on the worker's loop, as
    ``send`` would call them and as awa writes its own log line of each job. ``asend`` runs sync
    receivers in that one thread, and two trips per task made an async no-op task cost several
    times an async no-op job (docs/benchmarks.md, "django.tasks drain"). Any other receiver,
    sync or async, gets the signal through ``asend`` as Django specifies."""
    direct = _logging_only(signal, sender)
    if direct is None:
        await signal.asend(sender, task_result=result)
        return
    for log_receiver in direct:
        log_receiver(signal=signal, sender=sender, task_result=result)


def _changed(result: TaskResult[Any, Any], **changes: Any) -> TaskResult[Any, Any]:
    """A copy of ``result`` with ``changes``. Not ``dataclasses.replace`` (nor ``copy.copy``, which
    costs as much): ``replace`` builds the copy through ``TaskResult.__init__``, whose
    ``__post_init__`` normalises the arguments again, though they already are."""
    return assembled_result(changes, base=result)


def _finished(
    result: TaskResult[Any, Any], ctx: JobContext, error: BaseException | None, value: Any = None
) -> TaskResult[Any, Any]:
    """``result`` as the attempt left it, for ``task_finished``. A failure the worker will retry
    reports READY, as the stored job will read."""
    now = timezone.now()
    if error is None:
        return _changed(
            result, status=TaskResultStatus.SUCCESSFUL, finished_at=now, _return_value=value
        )
    final = _final(error, ctx)
    errors = list(result.errors)
    if not isinstance(error, Snooze):
        errors.append(task_error(error_entry(error, attempt=ctx.attempt, at=now)))
    return _changed(
        result,
        status=TaskResultStatus.FAILED if final else TaskResultStatus.READY,
        finished_at=now if final else None,
        errors=errors,
    )


def _call(
    task: Task[Any, Any],
    result: TaskResult[Any, Any] | None,
    args: list[Any],
    kwargs: dict[str, Any],
) -> Any:
    """Call the function of a task that takes its context (an async one returns its coroutine);
    the handlers call any other task's function themselves, one call fewer per task."""
    assert result is not None  # made for every task that takes its context
    return task.func(TaskContext(task_result=result), *args, **kwargs)


def _final(error: BaseException, ctx: JobContext) -> bool:
    """Whether the attempt's ``error`` ends the task FAILED (else the worker retries it)."""
    return isinstance(error, TerminalError | Cancel) or (
        not isinstance(error, Snooze) and ctx.attempt >= ctx.max_attempts
    )


def _handler(task: Task[Any, Any]) -> Callable[..., Any]:
    # The running attempt's TaskResult is made only when something reads it: the function (a
    # task that takes its context) or a signal someone hears (``_unheard``); otherwise a task
    # costs the worker little more than a native job. A failure's line is usually logged, so
    # its result is made then, from the same context (or the same read back).
    takes_context = task.takes_context

    if iscoroutinefunction(task.func):

        async def running_async(backend: AwaBackend, ctx: JobContext) -> TaskResult[Any, Any]:
            return _first_claim_result(backend, task, ctx) or await backend.aget_result(
                str(ctx.job_id)
            )

        async def finish_async(
            backend: AwaBackend,
            ctx: JobContext,
            result: TaskResult[Any, Any] | None,
            error: BaseException | None,
            value: Any = None,
        ) -> None:
            sender = type(backend)
            if _unheard(task_finished, sender, _finished_level(ctx, error)):
                return
            if result is None:
                result = await running_async(backend, ctx)
            await _asend(task_finished, sender, _finished(result, ctx, error, value))

        async def run_async(ctx: JobContext, args: list[Any], kwargs: dict[str, Any]) -> Any:
            backend = _backend(task)
            sender = type(backend)
            result: TaskResult[Any, Any] | None = None
            if takes_context or not _unheard(task_started, sender, logging.INFO):
                result = await running_async(backend, ctx)
                await _asend(task_started, sender, result)
            try:
                value = await (
                    _call(task, result, args, kwargs)
                    if takes_context
                    else task.func(*args, **kwargs)
                )
                stored = _stored(value)
            except BaseException as exc:
                # KeyboardInterrupt and SystemExit fail the attempt like any error (the
                # worker's executor records them); only the worker's own cancel ends it silently.
                if not stops_the_attempt(exc):
                    await finish_async(backend, ctx, result, exc)
                raise
            # A success is told at INFO (``_finished_level``): checked here, as it is nearly
            # every task's end, without the two calls of ``finish_async``.
            if not _unheard(task_finished, sender, logging.INFO):
                await finish_async(backend, ctx, result, None, value)
            return stored

        return run_async

    def running(backend: AwaBackend, ctx: JobContext) -> TaskResult[Any, Any]:
        return _first_claim_result(backend, task, ctx) or backend.get_result(str(ctx.job_id))

    def finish(
        backend: AwaBackend,
        ctx: JobContext,
        result: TaskResult[Any, Any] | None,
        error: BaseException | None,
        value: Any = None,
    ) -> None:
        sender = type(backend)
        if _unheard(task_finished, sender, _finished_level(ctx, error)):
            return
        if result is None:
            result = running(backend, ctx)
        _send(task_finished, sender, _finished(result, ctx, error, value))

    def run(ctx: JobContext, args: list[Any], kwargs: dict[str, Any]) -> Any:
        backend = _backend(task)
        sender = type(backend)
        result: TaskResult[Any, Any] | None = None
        if takes_context or not _unheard(task_started, sender, logging.INFO):
            result = running(backend, ctx)
            _send(task_started, sender, result)
        try:
            value = (
                _call(task, result, args, kwargs) if takes_context else task.func(*args, **kwargs)
            )
            stored = _stored(value)
        except BaseException as exc:
            finish(backend, ctx, result, exc)
            raise
        # As in ``run_async``: a success's level is INFO.
        if not _unheard(task_finished, sender, logging.INFO):
            finish(backend, ctx, result, None, value)
        return stored

    return run
