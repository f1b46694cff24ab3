"""Handlers of the workflow tests; every run is logged to ``tests_job_runs`` with its step name.
Worker subprocesses load them through AWA_JOB_MODULES."""

from __future__ import annotations

import time
from typing import Any

import awa_django as awa
from awa_django.declarations.jobs import JobContext
from tests.jobs import record_run


def _note(ctx: JobContext, what: str = "") -> str:
    step = ctx.workflow.step if ctx.workflow is not None else "-"
    return f"{step}{':' if what else ''}{what}"


@awa.job(kind="wf.add")
def add(ctx: JobContext, x: int) -> int:
    """Adds x to the previous step's result (a chain's running sum)."""
    assert ctx.workflow is not None
    previous = ctx.workflow.previous or 0
    record_run(ctx, _note(ctx))
    return int(previous) + x


@awa.job(kind="wf.collect")
def collect(ctx: JobContext) -> list[Any]:
    """A fan-in: its dependencies' results in order."""
    assert ctx.workflow is not None
    record_run(ctx, _note(ctx))
    return ctx.workflow.result_list


@awa.job(kind="wf.errors")
def errors(ctx: JobContext) -> dict[str, Any]:
    """An on_failure step (or a step ignoring a failure): what failed and why."""
    assert ctx.workflow is not None
    record_run(ctx, _note(ctx))
    return {
        name: (error or {}).get("reason") or (error or {}).get("message")
        for name, error in ctx.workflow.errors.items()
    }


@awa.job(kind="wf.fail")
def fail(ctx: JobContext) -> None:
    record_run(ctx, _note(ctx))
    raise awa.TerminalError("step broke")


@awa.job(kind="wf.wait_cancel")
def wait_cancel(ctx: JobContext, limit_s: float = 30.0) -> str:
    """Runs until cancelled (or ``limit_s``)."""
    record_run(ctx, _note(ctx, "started"))
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if ctx.is_cancelled():
            record_run(ctx, _note(ctx, "saw cancel"))
            return "cancelled"
        time.sleep(0.02)
    return "timed out"


@awa.job(kind="wf.sleep")
def sleep(ctx: JobContext, until: float = 0.0) -> int:
    """Sleeps until the wall-clock time ``until`` (steps of a group end at the same instant)."""
    time.sleep(max(0.0, until - time.time()))
    record_run(ctx, _note(ctx))
    return ctx.job_id


@awa.job(kind="wf.fail_first_run", max_attempts=1)
def fail_first_run(ctx: JobContext) -> str:
    """Fails for good on its first run, succeeds on any later one (a retry from the DLQ)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM tests_job_runs WHERE job_id = %s", [ctx.job_id])
        (before,) = cursor.fetchone()
    record_run(ctx, _note(ctx))
    if before == 0:
        raise awa.TerminalError("first run fails")
    return "fixed"


@awa.job(kind="wf.returns_a_set")
def returns_a_set(ctx: JobContext) -> set[int]:
    return {1, 2}


@awa.job(kind="wf.split")
def split(ctx: JobContext, parts: int) -> int:
    """Fans out at run time: one ``add`` step per part, the last one waiting for the first;
    with ``parts`` below 0, adds as many and then fails."""
    assert ctx.workflow is not None
    record_run(ctx, _note(ctx))
    count = abs(parts)
    for n in range(1, count + 1):
        after = ["part-1"] if n == count and count > 1 else []
        ctx.workflow.add(f"part-{n}", add, args={"x": n * 10}, after=after)
    if parts < 0:
        raise awa.TerminalError("no parts")
    return 0


@awa.job(kind="wf.acollect")
async def acollect(ctx: JobContext) -> list[Any]:
    """An async fan-in: its dependencies' results in order (a wide one's are read before it
    runs, off the event loop)."""
    assert ctx.workflow is not None
    return ctx.workflow.result_list
