"""Handlers that misbehave, for the tests of what a worker survives (issue #24): text that
PostgreSQL cannot store, values the database refuses, exceptions that are not errors, a process
exit. Worker subprocesses import this module through ``AWA_JOB_MODULES`` (see ``MODULES``);
in-process tests import it to register them."""

from __future__ import annotations

import asyncio
import os
import sys
import time

from asgiref.sync import sync_to_async

import awa_django as awa
from awa_django.core.handler_result import StoredReturn
from awa_django.declarations.jobs import JobContext
from awa_django.tasks.compat import task
from tests.jobs import record_and_close, record_run

# AWA_JOB_MODULES for a worker subprocess that runs these as well as tests.jobs.
MODULES = "tests.jobs,tests.misbehaving"

# A lone surrogate: not UTF-8, refused by json and jsonb. os.fsdecode and the surrogateescape
# error handler produce them from undecodable bytes.
SURROGATE = "\udcff"


@awa.job(kind="tests.surrogate_failure", max_attempts=2)
def surrogate_failure(ctx: JobContext) -> None:
    """Reports progress and fails, both with a lone surrogate."""
    record_run(ctx, "surrogate_failure")
    ctx.set_progress(50, f"file {SURROGATE}.txt")
    raise RuntimeError(f"bad {SURROGATE} text")


@awa.job(kind="tests.surrogate_cancel")
def surrogate_cancel(ctx: JobContext) -> None:
    raise awa.Cancel(f"gone {SURROGATE} away")


# -- values the database refuses, which only the write finds out --------------------------------


@awa.job(kind="tests.unstorable_result", max_attempts=2)
def unstorable_result(ctx: JobContext) -> StoredReturn:
    """Completes with a result jsonb refuses. StoredReturn.of refuses it first, so the text is
    built past that check, as a value that slipped past the boundary would reach the write."""
    record_run(ctx, "unstorable_result")
    return StoredReturn('{"r": "\\udcff"}')


@task(max_attempts=2)
def unstorable_task() -> dict[str, str]:
    """A django.tasks task whose return value jsonb would refuse (refused before the write)."""
    return {"r": SURROGATE}


@awa.job(kind="tests.retry_in_forever", max_attempts=2)
def retry_in_forever(ctx: JobContext) -> None:
    """Asks to be retried later than any timestamp can say. RetryAfter refuses such a delay, so
    it is set past that check, as a value that slipped past the boundary would reach the write."""
    record_run(ctx, "retry_in_forever")
    outcome = awa.RetryAfter(1)
    outcome.seconds = 1e300
    raise outcome


@awa.job(kind="tests.unstorable_checkpoint", max_attempts=2)
def unstorable_checkpoint(ctx: JobContext, seconds: float = 20.0) -> None:
    """Saves a checkpoint jsonb refuses, then runs until its worker asks it to stop."""
    # set_progress refuses this checkpoint; written past that check, it reaches the heartbeat.
    ctx.set_progress(10, "started")
    ctx.state.update({"percent": 10, "message": "started"}, {"file": SURROGATE})
    record_run(ctx, "checkpointed")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not ctx.is_cancelled():
        time.sleep(0.02)
    record_run(ctx, "saw cancel" if ctx.is_cancelled() else "ran out")


# -- handlers that raise what is not an Exception, or end their process ----------------------------


class Escape(BaseException):
    """A BaseException of the handler's own."""


@awa.job(kind="tests.raises_base", max_attempts=1)
def raises_base(ctx: JobContext, what: str) -> None:
    """Raises KeyboardInterrupt, SystemExit or a BaseException of its own, as ``what`` says."""
    record_run(ctx, what)
    raise_base(what)


@awa.job(kind="tests.raises_base_async", max_attempts=1)
async def raises_base_async(ctx: JobContext, what: str) -> None:
    """``raises_base`` on the event loop; ``what`` may also be its own CancelledError."""
    await sync_to_async(record_and_close)(ctx, f"async {what}")
    if what == "cancelled":
        raise asyncio.CancelledError("the handler's own, not the worker's")
    raise_base(what)


def raise_base(what: str) -> None:
    if what == "interrupt":
        raise KeyboardInterrupt("from a handler")
    if what == "exit":
        sys.exit(3)
    raise Escape("from a handler")


@task(max_attempts=1)
def task_exits() -> None:
    """A django.tasks task that calls sys.exit()."""
    sys.exit(4)


@task(max_attempts=1)
async def task_interrupts() -> None:
    raise KeyboardInterrupt("from an async task")


@awa.job(kind="tests.exits_process", max_attempts=2)
def exits_process(ctx: JobContext) -> None:
    """Ends its worker process on the first attempt, as a crash would (no cleanup at all)."""
    record_run(ctx, f"attempt {ctx.attempt}")
    if ctx.attempt == 1:
        os._exit(7)
