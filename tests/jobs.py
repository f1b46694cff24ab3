"""Job handlers the test suite enqueues. Worker subprocesses import this module through
``AWA_JOB_MODULES=tests.jobs``; records of what ran go to the ``tests_job_runs`` table."""

from __future__ import annotations

import json
import time

from django.db import connection

import awa_django as awa
from awa_django.declarations.jobs import JobContext


def record_run(ctx: JobContext, note: str = "") -> None:
    """Append one row per execution, so tests can count runs across processes."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO tests_job_runs (job_id, run_lease, attempt, note) VALUES (%s, %s, %s, %s)",
            [ctx.job_id, ctx.run_lease, ctx.attempt, note],
        )


@awa.job(kind="tests.record")
def record(ctx: JobContext, n: int = 0) -> None:
    record_run(ctx, str(n))


@awa.job(kind="tests.record_async")
async def record_async(ctx: JobContext, n: int = 0) -> None:
    from asgiref.sync import sync_to_async

    await sync_to_async(record_and_close)(ctx, f"async {n}")


def record_and_close(ctx: JobContext, note: str) -> None:
    # The executor thread's connection would otherwise outlive the test database.
    try:
        record_run(ctx, note)
    finally:
        connection.close()


@awa.job(kind="tests.orm_thread_pid", max_attempts=3)
async def orm_thread_pid(ctx: JobContext) -> None:
    """Records the backend pid of the ORM connection async handlers share; left open."""
    from asgiref.sync import sync_to_async

    await sync_to_async(record_backend_pid)(ctx)


def record_backend_pid(ctx: JobContext) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    record_run(ctx, str(pid))


@awa.job(kind="tests.noop")
def noop(ctx: JobContext, n: int = 0) -> None:
    return None


@awa.job(kind="tests.noop_async")
async def noop_async(ctx: JobContext, n: int = 0) -> None:
    return None


@awa.job(kind="tests.typed")
def typed(ctx: JobContext, user_id: int, email: str, tags: list | None = None) -> None:
    return None


@awa.job(kind="tests.always_fails", max_attempts=3)
def always_fails(ctx: JobContext, message: str = "boom") -> None:
    raise RuntimeError(f"{message} on attempt {ctx.attempt}")


@awa.job(kind="tests.nul_failure", max_attempts=2)
def nul_failure(ctx: JobContext) -> None:
    """Reports progress and fails, both with a NUL character, which jsonb cannot hold."""
    ctx.set_progress(50, "half\x00way")
    raise RuntimeError("before\x00after")


@awa.job(kind="tests.nul_cancel")
def nul_cancel(ctx: JobContext) -> None:
    raise awa.Cancel("no\x00longer")


@awa.job(kind="tests.retry_after")
def retry_after(ctx: JobContext, seconds: float = 0.05) -> None:
    record_run(ctx, "retry_after")
    if ctx.attempt == 1:
        raise awa.RetryAfter(seconds)


@awa.job(kind="tests.snooze_once", max_attempts=1)
def snooze_once(ctx: JobContext) -> None:
    record_run(ctx, "snooze")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM tests_job_runs WHERE job_id = %s", [ctx.job_id])
        (runs,) = cursor.fetchone()
    if runs == 1:
        raise awa.Snooze(0.05)


@awa.job(kind="tests.cancels")
def cancels(ctx: JobContext) -> None:
    raise awa.Cancel("not needed any more")


class PaymentDeclined(awa.TerminalError):
    pass


@awa.job(kind="tests.terminal")
def terminal(ctx: JobContext) -> None:
    raise PaymentDeclined("card declined")


@awa.job(kind="tests.returns_outcome")
def returns_outcome(ctx: JobContext) -> object:
    return awa.Cancel("returned, not raised")


@awa.job(kind="tests.sleepy")
def sleepy(ctx: JobContext, seconds: float = 1.0) -> None:
    """Sleeps in small steps, stopping early once the worker asks it to."""
    record_run(ctx, "sleepy-start")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.02)
    record_run(ctx, "sleepy-end")


@awa.job(kind="tests.slow_first")
def slow_first(ctx: JobContext, seconds: float = 30.0, honour_cancel: bool = True) -> None:
    """Attempt 1 saves a checkpoint and then runs long; later attempts finish at once and record
    the checkpoint they were handed."""
    if ctx.attempt == 1:
        ctx.set_progress(50, "halfway", checkpoint={"step": 1})
        record_run(ctx, "slow-start")
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not (honour_cancel and ctx.is_cancelled()):
            time.sleep(0.02)
        record_run(ctx, "slow-cancelled" if ctx.is_cancelled() else "slow-end")
        return
    record_run(ctx, f"resumed checkpoint={ctx.checkpoint}")


@awa.job(kind="tests.checkpointed_retry")
def checkpointed_retry(ctx: JobContext) -> None:
    progress = ctx.progress or {}
    record_run(
        ctx,
        f"checkpoint={ctx.checkpoint} progress={progress.get('percent')} {progress.get('message')}",
    )
    if ctx.attempt == 1:
        ctx.set_progress(10, "page 3 of 9", checkpoint={"page": 3})
        raise RuntimeError("transient")


@awa.job(kind="tests.cooperative")
def cooperative(ctx: JobContext, seconds: float = 20.0) -> None:
    """Runs until cancelled, then returns normally (its completion must then be stale)."""
    record_run(ctx, "coop-start")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not ctx.is_cancelled():
        time.sleep(0.02)
    record_run(ctx, "coop-saw-cancel" if ctx.is_cancelled() else "coop-timeout")


@awa.job(kind="tests.unique_record", unique=awa.Unique())
def unique_record(ctx: JobContext, n: int = 0) -> None:
    record_run(ctx, f"unique {n}")


@awa.job(kind="tests.keyed")
def keyed(ctx: JobContext, key: str, seq: int, seconds: float = 0.02) -> None:
    """Records when it starts and ends, so tests can check per-key execution order."""
    record_run(ctx, f"start {key} {seq}")
    time.sleep(seconds)
    record_run(ctx, f"end {key} {seq}")


# -- callbacks ---------------------------------------------------------------------------------


@awa.job(kind="tests.parks", max_attempts=2)
def parks(ctx: JobContext, timeout_s: float = 3600.0) -> awa.WaitForCallback:
    """Registers a callback, records its token and parks the attempt."""
    token = ctx.register_callback(timeout=timeout_s)
    record_run(ctx, f"token={token}")
    return awa.WaitForCallback(token)


@awa.job(kind="tests.waits")
async def waits(ctx: JobContext) -> None:
    """Waits in the same attempt for a resume, then records the payload it got."""
    from asgiref.sync import sync_to_async

    token = await ctx.aregister_callback(timeout=3600)
    await sync_to_async(record_and_close)(ctx, f"token={token}")
    payload = await ctx.wait_for_callback(token)
    await sync_to_async(record_and_close)(ctx, f"resumed={json.dumps(payload, sort_keys=True)}")


@awa.job(kind="tests.waits_sync")
def waits_sync(ctx: JobContext) -> None:
    """``waits`` for a sync handler, twice in one attempt."""
    for step in (1, 2):
        token = ctx.register_callback(timeout=3600)
        record_run(ctx, f"token={token}")
        payload = ctx.wait_for_callback_sync(token)
        record_run(ctx, f"resumed{step}={json.dumps(payload)}")


@awa.job(
    kind="tests.fails_through_lease",
    max_attempts=1,
    description="Fails while its run_lease is at most last_failing_lease",
    owner="tests",
    docs_url="https://example.invalid/fails",
)
def fails_through_lease(ctx: JobContext, last_failing_lease: int = 1) -> None:
    """Records every run; raises until the attempt's run_lease passes ``last_failing_lease``
    (so a DLQ retry, which gets a larger lease, succeeds)."""
    record_run(ctx, f"lease={ctx.run_lease} attempt={ctx.attempt}")
    if ctx.run_lease <= last_failing_lease:
        raise RuntimeError(f"failing on lease {ctx.run_lease}")


# -- exact round trips -------------------------------------------------------------------------


def exact_repr(value: object) -> str:
    """Text that differs whenever ``value`` differs in value or type at any depth (dict key
    order aside, which jsonb does not keep): ``1e16`` and ``10**16``, ``0.0`` and ``-0.0``,
    ``"a"`` and a str enum member all read differently."""
    if type(value) is dict:
        items = sorted(value.items())
        return "{" + ", ".join(f"{key!r}: {exact_repr(item)}" for key, item in items) + "}"
    if type(value) in (list, tuple):
        return f"{type(value).__name__}[" + ", ".join(exact_repr(item) for item in value) + "]"
    return f"{type(value).__qualname__}({value!r})"


@awa.job(kind="tests.echo")
def echo(ctx: JobContext, **args: object) -> None:
    """Records exactly what it was handed: its arguments, metadata and tags."""
    received = {"args": args, "metadata": dict(ctx.metadata), "tags": list(ctx.tags)}
    record_run(ctx, exact_repr(received))


@awa.job(kind="tests.checkpoint_echo", max_attempts=2)
def checkpoint_echo(ctx: JobContext, checkpoint: dict) -> None:
    """Attempt 1 saves ``checkpoint`` and fails; attempt 2 records the checkpoint it got."""
    if ctx.attempt == 1:
        ctx.set_progress(10, "saved", checkpoint=checkpoint)
        raise awa.RetryAfter(0)
    record_run(ctx, exact_repr(ctx.checkpoint))


@awa.job(kind="tests.returns_value")
def returns_value(ctx: JobContext, value: object = None) -> object:
    return value


@awa.job(kind="tests.returns_value_async")
async def returns_value_async(ctx: JobContext, value: object = None) -> object:
    return value


@awa.job(kind="tests.returns_set", max_attempts=3)
def returns_set(ctx: JobContext) -> object:
    return {1, 2}


@awa.job(kind="tests.returns_too_much", max_attempts=3)
async def returns_too_much(ctx: JobContext) -> object:
    return "x" * (64 * 1024)


@awa.job(kind="tests.overrun", max_attempts=2)
def overrun(ctx: JobContext, seconds: float = 6.0, blocking: bool = False) -> None:
    """Runs ``seconds`` whatever its cancel flag says: in short steps of Python, or (blocking)
    in one call into C that Python cannot interrupt. Records its start and how it ended."""
    record_run(ctx, f"start {ctx.attempt}")
    try:
        if blocking:
            time.sleep(seconds)
        else:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                time.sleep(0.01)
    except awa.DeadlineExceeded:
        record_run(ctx, f"stopped {ctx.attempt}")
        raise
    record_run(ctx, f"end {ctx.attempt}")


@awa.job(kind="tests.overrun_async", max_attempts=2)
async def overrun_async(ctx: JobContext, seconds: float = 6.0) -> None:
    """``overrun`` for an async handler: one long await, whatever its cancel flag says."""
    import asyncio

    from asgiref.sync import sync_to_async

    await sync_to_async(record_and_close)(ctx, f"start {ctx.attempt}")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        await sync_to_async(record_and_close)(ctx, f"stopped {ctx.attempt}")
        raise
    await sync_to_async(record_and_close)(ctx, f"end {ctx.attempt}")


@awa.job(kind="tests.waits_then_overruns", max_attempts=1)
async def waits_then_overruns(ctx: JobContext, seconds: float = 6.0) -> None:
    """Waits in place for a resume, then runs ``seconds`` more, whatever its cancel flag says."""
    import asyncio

    from asgiref.sync import sync_to_async

    token = await ctx.aregister_callback(timeout=3600)
    await sync_to_async(record_and_close)(ctx, f"token={token}")
    await ctx.wait_for_callback(token)
    await sync_to_async(record_and_close)(ctx, "resumed")
    await asyncio.sleep(seconds)
    await sync_to_async(record_and_close)(ctx, "ran on")


@awa.job(kind="tests.claim_seen")
def claim_seen(ctx: JobContext) -> dict:
    """What the attempt's context says of its claim."""
    assert ctx.claimed_at is not None
    return {"by": ctx.claimed_by, "at": ctx.claimed_at.isoformat()}


@awa.job(kind="tests.nap")
def nap(ctx: JobContext, seconds: float = 0.5) -> None:
    """Sleeps without touching the database: the connections a worker running it holds are the
    worker's own (tests/processes/test_fleet_connections.py)."""
    time.sleep(seconds)


@awa.job(kind="tests.record_pid")
def record_pid(ctx: JobContext, seconds: float = 0.0) -> None:
    """Records which worker process ran it (its pid), then takes ``seconds``."""
    import os

    record_run(ctx, str(os.getpid()))
    time.sleep(seconds)
