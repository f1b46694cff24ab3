"""What ``execute`` makes of what a handler raises, without a database: every exception, a
``BaseException`` too, becomes the attempt's error; only the worker cancelling the job's task
(an attempt abandoned at the shutdown timeout) propagates."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from typing import Any

import pytest

from awa_django.core.claimed_job import ClaimedJob
from awa_django.declarations.jobs import DeclaredJob, JobContext
from awa_django.worker.executor import context_for, execute
from awa_django.worker.handler_threads import HandlerThreads

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def claimed() -> ClaimedJob:
    return ClaimedJob(
        queue="default",
        priority=2,
        shard=0,
        lane_seq=1,
        ready_slot=0,
        job_id=1,
        kind="k",
        args={},
        attempt=1,
        run_lease=1,
        max_attempts=1,
        run_at=NOW,
        created_at=NOW,
        metadata={},
        tags=[],
        errors=[],
    )


def run(func: Any) -> BaseException | None:
    async def main() -> BaseException | None:
        job = claimed()
        handler: DeclaredJob[Any, Any] = DeclaredJob(
            func, kind="k", queue=None, priority=None, max_attempts=None
        )
        threads = HandlerThreads(1)
        try:
            return (await execute(job, handler, context_for(job), threads)).outcome
        finally:
            threads.shutdown()

    return asyncio.run(main())


def interrupt(ctx: JobContext) -> None:
    raise KeyboardInterrupt


def leave(ctx: JobContext) -> None:
    sys.exit(2)


async def interrupt_async(ctx: JobContext) -> None:
    raise KeyboardInterrupt


async def leave_async(ctx: JobContext) -> None:
    sys.exit(2)


async def own_cancel(ctx: JobContext) -> None:
    # A future the handler awaited was cancelled under it: its error, not a cancel of ours.
    future = asyncio.get_running_loop().create_future()
    future.cancel()
    await future


def own_cancel_sync(ctx: JobContext) -> None:
    raise asyncio.CancelledError


def closes_sync(ctx: JobContext) -> None:
    raise GeneratorExit


@pytest.mark.parametrize(
    ("func", "error"),
    [
        (interrupt, KeyboardInterrupt),
        (leave, SystemExit),
        (interrupt_async, KeyboardInterrupt),
        (leave_async, SystemExit),
        (own_cancel, asyncio.CancelledError),
        (own_cancel_sync, asyncio.CancelledError),
        (closes_sync, RuntimeError),  # as the thread hands it over: "sync handler raised ..."
    ],
)
def test_base_exceptions_of_a_handler_are_its_attempts_error(func: Any, error: type) -> None:
    assert isinstance(run(func), error)


def test_the_worker_cancelling_a_job_still_cancels_it() -> None:
    started = asyncio.Event()

    async def sleeps(ctx: JobContext) -> None:
        started.set()
        await asyncio.sleep(60)

    async def main() -> None:
        job = claimed()
        handler: DeclaredJob[Any, Any] = DeclaredJob(
            sleeps, kind="k", queue=None, priority=None, max_attempts=None
        )
        task = asyncio.create_task(execute(job, handler, context_for(job), HandlerThreads(1)))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
