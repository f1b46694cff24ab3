"""The worker side of ``AwaBackend``: turns a ``"django.tasks:<module_path>"`` kind back into a
runnable awa handler.

``resolve`` is the registry's resolver for that prefix (``awa_django.jobs``). The handler it
builds reads the task's ``TaskResult`` (so ``worker_ids`` already holds this claim and
``TaskContext.attempt`` counts from 1), sends ``task_started``, calls the function (async tasks
on the worker's loop), sends ``task_finished`` and returns the value as a ``StoredReturn`` so the
worker keeps it with the completed job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from inspect import iscoroutinefunction
from typing import Any

from django.utils import timezone
from django.utils.module_loading import import_string

from awa_django.core.completion import error_entry
from awa_django.core.handler_result import StoredReturn
from awa_django.exceptions import Cancel, Snooze, TerminalError
from awa_django.jobs import Job, JobContext
from awa_django.priorities import TASK_KIND_PREFIX
from awa_django.tasks.backend import AwaBackend, task_error
from awa_django.tasks.compat import (
    Task,
    TaskContext,
    TaskResult,
    TaskResultStatus,
    task_finished,
    task_started,
)
from awa_django.worker.executor import stops_the_attempt

logger = logging.getLogger(__name__)


def resolve(kind: str) -> Job[Any, Any] | None:
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
    return Job(_handler(task), kind=kind, queue=None, priority=None, max_attempts=None)


def _backend(task: Task[Any, Any]) -> AwaBackend:
    backend = task.get_backend()
    if not isinstance(backend, AwaBackend):
        raise TerminalError(
            f"task {task.module_path} is configured on backend {task.backend!r}, which is not "
            "an AwaBackend in this worker's TASKS setting"
        )
    return backend


def _call_args(task: Task[Any, Any], result: TaskResult[Any, Any], args: list[Any]) -> list[Any]:
    return [TaskContext(task_result=result), *args] if task.takes_context else list(args)


def _finished(
    result: TaskResult[Any, Any], ctx: JobContext, error: BaseException | None, value: Any = None
) -> TaskResult[Any, Any]:
    """``result`` as the attempt left it, for ``task_finished``. A failure the worker will retry
    reports READY, as the stored job will read."""
    now = timezone.now()
    if error is None:
        done = replace(result, status=TaskResultStatus.SUCCESSFUL, finished_at=now)
        object.__setattr__(done, "_return_value", value)
        return done
    final = isinstance(error, TerminalError | Cancel) or (
        not isinstance(error, Snooze) and ctx.attempt >= ctx.max_attempts
    )
    errors = list(result.errors)
    if not isinstance(error, Snooze):
        errors.append(task_error(error_entry(error, attempt=ctx.attempt, at=now)))
    return replace(
        result,
        status=TaskResultStatus.FAILED if final else TaskResultStatus.READY,
        finished_at=now if final else None,
        errors=errors,
    )


def _handler(task: Task[Any, Any]) -> Callable[..., Any]:
    if iscoroutinefunction(task.func):

        async def run_async(ctx: JobContext, args: list[Any], kwargs: dict[str, Any]) -> Any:
            backend = _backend(task)
            sender = type(backend)
            result = await backend.aget_result(str(ctx.job_id))
            await task_started.asend(sender, task_result=result)
            try:
                value = await task.func(*_call_args(task, result, args), **kwargs)
                stored = StoredReturn.of(value)
            except BaseException as exc:
                # KeyboardInterrupt and SystemExit fail the attempt like any error (the
                # worker's executor records them); only the worker's own cancel ends it silently.
                if not stops_the_attempt(exc):
                    await task_finished.asend(sender, task_result=_finished(result, ctx, exc))
                raise
            await task_finished.asend(sender, task_result=_finished(result, ctx, None, value))
            return stored

        return run_async

    def run(ctx: JobContext, args: list[Any], kwargs: dict[str, Any]) -> Any:
        backend = _backend(task)
        sender = type(backend)
        result = backend.get_result(str(ctx.job_id))
        task_started.send(sender, task_result=result)
        try:
            value = task.func(*_call_args(task, result, args), **kwargs)
            stored = StoredReturn.of(value)
        except BaseException as exc:
            task_finished.send(sender, task_result=_finished(result, ctx, exc))
            raise
        task_finished.send(sender, task_result=_finished(result, ctx, None, value))
        return stored

    return run
