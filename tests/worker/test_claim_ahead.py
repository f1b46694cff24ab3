"""A full claim starts the next claim before the jobs it returned, and a claim started that way
is always run to the end: its jobs execute even when the worker is asked to stop meanwhile."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection

import awa_django as awa
from awa_django.core.claimed_job import ClaimedJob
from awa_django.core.retry import RetryPolicy
from awa_django.declarations.jobs import DeclaredJob, JobContext
from awa_django.storage.connections import open_pool
from awa_django.worker.completer import Completer
from awa_django.worker.dispatcher import Dispatcher, DispatcherConfig
from awa_django.worker.handler_threads import HandlerThreads
from awa_django.worker.job_log import JobLog, JobLogConfig
from tests.conftest import truncate_awa_tables
from tests.jobs import record

pytestmark = pytest.mark.usefixtures("awa_db")

CONCURRENCY = 6
CLAIM_BATCH = 2


class RecordingDispatcher(Dispatcher):
    """Notes how many of its jobs had been started when each claim began."""

    running_at_claim: list[int]

    async def _claim(self, limit: int) -> list[ClaimedJob]:
        self.running_at_claim.append(len(self._running))
        return await super()._claim(limit)


async def run_dispatcher(*, until: int, stop_at: tuple[int, int] | None = None) -> list[int]:
    """Run one dispatcher of ``record``'s queue until ``until`` handlers ran, or, with
    ``stop_at=(claims, steps)``, ask it to stop ``steps`` event-loop steps after its claim
    number ``claims`` began, and wait until it returns and its jobs finish. Returns the ``n``
    of every handler run."""
    ran: list[int] = []
    stopping = asyncio.Event()
    enough = asyncio.Event()
    pool = await open_pool("default", max_size=4)
    completer = Completer(
        pool,
        batch_size=100,
        flush_s=0.001,
        policy=RetryPolicy(base_s=1, max_s=1, jitter=0, unknown_kind_timeout_s=3600),
        now=lambda: datetime.now(UTC),
    )
    await completer.start()

    async def handler(ctx: JobContext, n: int = 0) -> None:
        ran.append(n)
        if len(ran) == until:
            enough.set()

    async def stop_later(claims: int, steps: int) -> None:
        while dispatcher.claim_rounds < claims:
            await asyncio.sleep(0)
        for _ in range(steps):
            await asyncio.sleep(0)
        stopping.set()

    job: DeclaredJob[Any, Any] = DeclaredJob(
        handler, kind=record.kind, queue=None, priority=None, max_attempts=None
    )
    dispatcher = RecordingDispatcher(
        DispatcherConfig(
            queue="default",
            concurrency=CONCURRENCY,
            claim_batch_size=CLAIM_BATCH,
            poll_interval_s=0.05,
            claimed_by="claim-ahead-test",
            policy=RetryPolicy(base_s=1, max_s=1, jitter=0, unknown_kind_timeout_s=3600),
        ),
        pool=pool,
        completer=completer,
        threads=HandlerThreads(1),
        job_log=JobLog(JobLogConfig()),
        resolve=lambda kind: job,
        now=lambda: datetime.now(UTC),
    )
    dispatcher.running_at_claim = []
    try:
        run = asyncio.create_task(dispatcher.run(stopping))
        waits = [asyncio.ensure_future(enough.wait()), run]
        if stop_at is not None:
            waits.append(asyncio.ensure_future(stop_later(*stop_at)))
        await asyncio.wait(waits, timeout=10, return_when=asyncio.FIRST_COMPLETED)
        stopping.set()
        await asyncio.wait_for(run, 10)
        await asyncio.gather(*dispatcher.in_flight)
        # Long enough for a claim left behind in flight to commit what it claimed.
        await asyncio.sleep(0.05)
        await completer.stop()
    finally:
        await pool.close()
    assert dispatcher.permits.free == CONCURRENCY  # type: ignore[union-attr]
    if stop_at is None:
        # Every claim after the first began before the jobs of the claim before it started.
        assert dispatcher.running_at_claim[:3] == [0, 0, 0]
    return ran


def claims() -> tuple[int, int]:
    """(claimed attempts, claimed attempts without a closure)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), count(*) FILTER (WHERE NOT EXISTS ("
            " SELECT 1 FROM awa.done_entries d WHERE d.job_id = c.job_id"
            " AND d.run_lease = c.run_lease)) FROM awa.claim_receipts c"
        )
        total, unclosed = cursor.fetchone()
    return int(total), int(unclosed)


def test_the_next_claim_starts_before_the_jobs_of_a_full_one() -> None:
    awa.enqueue_many(record, [{"n": n} for n in range(6)])
    ran = asyncio.run(run_dispatcher(until=6))
    assert sorted(ran) == list(range(6))
    assert claims() == (6, 0)


@pytest.mark.parametrize("claim", [2, 3])
def test_every_claimed_job_runs_wherever_the_stop_lands(claim: int) -> None:
    # The stop is moved one event-loop step further each round, so it lands in every gap of
    # the claim cycle, including the one between starting a claim ahead and awaiting it.
    for steps in range(6):
        awa.enqueue_many(record, [{"n": n} for n in range(12)])
        ran = asyncio.run(run_dispatcher(until=12, stop_at=(claim, steps)))
        claimed, unclosed = claims()
        assert (unclosed, len(ran)) == (0, claimed), f"stop {steps} steps after claim {claim}"
        assert claimed < 12, "the stop came after every job had run"
        truncate_awa_tables()
