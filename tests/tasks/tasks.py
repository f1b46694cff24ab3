"""Django ``@task`` functions the django.tasks backend tests enqueue. Worker subprocesses import
them by module path (``tests.tasks.tasks.<name>``); each run is logged to ``tests_job_runs``."""

from __future__ import annotations

import threading
import time

from asgiref.sync import sync_to_async
from django.db import connection

from awa_django.tasks.compat import TaskContext, TaskResultStatus, task


def log_run(note: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO tests_job_runs (note) VALUES (%s)", [note])


@task
def add(a: int, b: int) -> int:
    log_run(f"add {a} {b}")
    return a + b


@task(queue_name="email")
async def shout(text: str) -> str:
    await sync_to_async(log_run)(f"shout {text}")
    return text.upper()


@task(takes_context=True)
def with_context(context: TaskContext, label: str) -> dict:
    log_run(f"context {label}")
    result = context.task_result
    return {"attempt": context.attempt, "id": result.id, "workers": len(result.worker_ids)}


@task(priority=50)
def urgent(label: str) -> None:
    log_run(f"urgent {label}")


@task(priority=-100)
def lazy(label: str) -> None:
    log_run(f"lazy {label}")


@task(takes_context=True, max_attempts=3)
def flaky(context: TaskContext) -> str:
    log_run(f"flaky {context.attempt}")
    if context.attempt == 1:
        raise ConnectionError("first attempt fails")
    return "recovered"


@task
def always_fails() -> None:
    raise ValueError("never works")


@task
def huge_result() -> str:
    return "x" * (65 * 1024)


@task
def not_json() -> object:
    return {1, 2}


@task
def nap(seconds: float) -> None:
    log_run("nap start")
    time.sleep(seconds)


@task(max_attempts=3, tags=["declared"])
def tagged(label: str) -> str:
    log_run(f"tagged {label}")
    return label


@task
def echo(*args: object, **kwargs: object) -> dict:
    """Returns exactly what it was handed, to be kept as its result."""
    return {"args": list(args), "kwargs": kwargs}


@task
def ranked(label: str) -> None:
    log_run(label)


def _told(context: TaskContext) -> dict:
    """What a running task was told about its own result, as JSON."""
    result = context.task_result
    return {
        "running": result.status == TaskResultStatus.RUNNING,
        "enqueued_at": result.enqueued_at.isoformat(),
        "started_at": result.started_at.isoformat(),
        "last_attempted_at": result.last_attempted_at.isoformat(),
        "worker_ids": result.worker_ids,
        "errors": [error.exception_class_path for error in result.errors],
        "priority": result.task.priority,
        "args": result.args,
        "kwargs": result.kwargs,
        "attempt": context.attempt,
    }


@task(takes_context=True)
def told(context: TaskContext, *args: object, **kwargs: object) -> dict:
    return _told(context)


@task(takes_context=True, max_attempts=3)
def told_on_retry(context: TaskContext) -> dict:
    if context.attempt == 1:
        raise ConnectionError("first attempt fails")
    return _told(context)


@task
async def where_async() -> int:
    """The thread the async task ran in."""
    return threading.get_ident()


@task
def returns_nothing() -> None:
    log_run("returns_nothing")


@task
async def returns_nothing_async() -> None:
    pass


# Keys whose first run failed (fails_once, fails_once_async): a second run of the same key
# succeeds. In-process runs share the module.
_failed_keys: set[str] = set()


def _fail_first_run(key: str) -> str:
    if key not in _failed_keys:
        _failed_keys.add(key)
        raise ConnectionError("first attempt fails")
    return key


@task(max_attempts=2)
def fails_once(key: str) -> str:
    return _fail_first_run(key)


@task(max_attempts=2)
async def fails_once_async(key: str) -> str:
    return _fail_first_run(key)
