"""The leader's queue-stats pass: per-queue depth by state and lag, against real PostgreSQL."""

from __future__ import annotations

import asyncio
import sys
import time
from datetime import timedelta

import pytest
from django.db import connection

import awa_django as awa
from awa_django.core.claimed_job import claimed_job_rows
from awa_django.maintenance.queue_stats import QueueSampler, QueueStatsConfig, QueueStatsResult
from awa_django.storage.connections import connect, open_pool
from awa_django.storage.queue import ClaimRequest, QueueDepth, claim_ready
from awa_django.storage.statement import run_async
from awa_django.telemetry import get_telemetry
from tests.conftest import run_burst
from tests.jobs import noop, retry_after

pytestmark = pytest.mark.usefixtures("awa_db")


def run_pass() -> QueueStatsResult:
    async def main() -> QueueStatsResult:
        pool = await open_pool("default", max_size=1)
        try:
            return await QueueSampler(pool, QueueStatsConfig(interval_s=30.0)).run_once()
        finally:
            await pool.close()

    return asyncio.run(main())


def claim_one(queue: str) -> None:
    async def main() -> None:
        async with await connect("default") as conn:
            claimed = await run_async(
                conn,
                claim_ready(
                    ClaimRequest(queue=queue, claimed_by="tests", deadline_s=0, aging_s=0),
                    rows=claimed_job_rows,
                    limit=1,
                ),
            )
            assert len(claimed) == 1

    asyncio.run(main())


def make_mix() -> None:
    """default: 1 retryable, 1 running, 2 available, 1 scheduled (plus a completed and a
    cancelled job that count nowhere); email: 1 available."""
    retry_after.enqueue(seconds=3600)  # first attempt asks for a retry an hour later
    noop.enqueue()  # completes
    run_burst()
    noop.enqueue()
    claim_one("default")  # stays open: running
    noop.enqueue(n=1)
    noop.enqueue(n=2)
    awa.cancel(noop.enqueue(n=3))  # tombstoned: not waiting
    awa.enqueue(noop, run_at=timedelta(hours=1))
    awa.enqueue(noop, queue="email")


@pytest.fixture(autouse=True)
def fresh_telemetry():
    get_telemetry.cache_clear()
    yield
    get_telemetry.cache_clear()


def test_a_pass_counts_each_state_per_queue_and_measures_lag():
    make_mix()
    time.sleep(0.05)  # the oldest waiting job is measurably late
    depths = {d.queue: d for d in run_pass().depths}

    default = depths["default"]
    assert (default.available, default.scheduled, default.retryable, default.running) == (
        2,
        1,
        1,
        1,
    )
    assert default.lag_s >= 0.05
    email = depths["email"]
    assert (email.available, email.scheduled, email.retryable, email.running) == (1, 0, 0, 0)
    assert email.lag_s > 0


def test_a_drained_queue_reports_zeros():
    noop.enqueue()
    run_burst()
    assert run_pass().depths == (
        QueueDepth(queue="default", available=0, scheduled=0, retryable=0, running=0, lag_s=0.0),
    )


def test_without_opentelemetry_the_pass_still_stores_samples(monkeypatch):
    # An entry of None makes every ``import opentelemetry...`` raise ImportError.
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    get_telemetry.cache_clear()
    noop.enqueue()
    result = run_pass()
    assert [(d.queue, d.available) for d in result.depths] == [("default", 1)]
    assert not result.changed
    with connection.cursor() as cursor:
        cursor.execute("SELECT queue, available FROM awa.queue_stat_samples")
        assert cursor.fetchall() == [("default", 1)]
