"""Rate limits: a per-process token bucket in the dispatcher, and the fleet-wide bucket kept in
PostgreSQL that several worker processes share."""

from __future__ import annotations

import asyncio
import json

import pytest
from django.db import connection
from django.test import override_settings

from awa_django.core.claimed_job import claimed_job_rows
from awa_django.maintenance.ledgers import LedgerCleaner, LedgerConfig
from awa_django.storage import connections
from awa_django.storage.connections import connect
from awa_django.storage.queue import ClaimRequest
from awa_django.storage.rate_limits import FleetBudget, claim_ready_limited
from awa_django.storage.statement import run_async
from awa_django.worker.rate_limit import TokenBucket
from tests.conftest import run_burst, wait_until
from tests.jobs import noop

JOBS = 200
RATE = (20, 20)
# (200 - 20 burst) / 20 per second: the last claim comes at least 9 s after the first.
LOWER_BOUND_S = 8.5


def claim_span_s() -> float:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), extract(epoch FROM max(claimed_at) - min(claimed_at)) "
            "FROM awa.claim_receipts"
        )
        count, span = cursor.fetchone()
    assert count == JOBS
    return float(span)


def completed() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.done_entries WHERE outcome = 'completed'")
        return cursor.fetchone()[0]


@pytest.mark.usefixtures("awa_db")
def test_a_process_rate_limit_paces_claims():
    noop.enqueue_many([{"n": i} for i in range(JOBS)])
    queues = {"default": {"concurrency": 50, "rate_limit": RATE}, "email": {}}
    with override_settings(AWA={"QUEUES": queues}):
        summary = run_burst(queues={"default": 50})
    assert summary.claimed == JOBS and completed() == JOBS
    assert claim_span_s() >= LOWER_BOUND_S


def test_a_fleet_rate_limit_holds_across_worker_processes(worker_process):
    noop.enqueue_many([{"n": i} for i in range(JOBS)])
    overrides = {
        "QUEUES": {
            "default": {"concurrency": 50, "rate_limit": RATE, "rate_limit_scope": "fleet"},
            "email": {},
        }
    }
    env = {"AWA_OVERRIDES": json.dumps(overrides)}
    workers = [worker_process("--queue", "default", env=env) for _ in range(2)]
    for worker in workers:
        worker.wait_ready()
    wait_until(lambda: completed() == JOBS, timeout=60)
    # Two processes with a per-process bucket would finish in about half the time.
    assert claim_span_s() >= LOWER_BOUND_S
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(DISTINCT claimed_by) FROM awa.claim_receipts")
        assert cursor.fetchone()[0] == 2
        cursor.execute("SELECT sum(jobs) FROM awa.rate_ledger")
        assert cursor.fetchone()[0] == JOBS


@pytest.mark.usefixtures("awa_db")
def test_a_fleet_claim_reports_how_long_the_budget_holds_it_back():
    noop.enqueue_many([{"n": i} for i in range(10)])

    async def main() -> tuple[list[int], float | None, list[int], float | None]:
        async with await connect("default") as conn:
            request = ClaimRequest(queue="default", claimed_by="t", deadline_s=0)
            budget = FleetBudget(rate=2.0, burst=3)
            first = await run_async(
                conn, claim_ready_limited(request, budget, rows=claimed_job_rows, limit=5)
            )
            second = await run_async(
                conn, claim_ready_limited(request, budget, rows=claimed_job_rows, limit=5)
            )
        return (
            [j.job_id for j in first.jobs],
            first.throttled_for_s,
            [j.job_id for j in second.jobs],
            second.throttled_for_s,
        )

    first, first_wait, second, second_wait = asyncio.run(main())
    assert len(first) == 3 and second == []
    # Three tokens spent at 2/s: the next whole token is about half a second away.
    assert first_wait is not None and 0.3 < first_wait <= 0.5
    assert second_wait is not None and 0 < second_wait <= 0.5


@pytest.mark.usefixtures("awa_db")
def test_a_drained_queue_is_not_reported_as_throttled():
    noop.enqueue_many([{"n": i} for i in range(2)])

    async def main() -> float | None:
        async with await connect("default") as conn:
            request = ClaimRequest(queue="default", claimed_by="t", deadline_s=0)
            budget = FleetBudget(rate=100.0, burst=100)
            claim = await run_async(
                conn, claim_ready_limited(request, budget, rows=claimed_job_rows, limit=5)
            )
        assert len(claim.jobs) == 2
        return claim.throttled_for_s

    assert asyncio.run(main()) is None


@pytest.mark.usefixtures("awa_db")
def test_the_leader_keeps_only_the_newest_ledger_row_per_queue():
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.rate_ledger (queue, claimed_at, jobs, full_at) "
            "SELECT q, now(), 1, now() FROM generate_series(1, 5), "
            "unnest(ARRAY['default', 'email']) AS q"
        )

    async def main() -> int:
        pool = await connections.open_pool("default", max_size=2)
        try:
            return (
                await LedgerCleaner(pool, LedgerConfig(interval_s=1, batch_size=3)).run_once()
            ).deleted
        finally:
            await pool.close()

    assert asyncio.run(main()) == 8
    with connection.cursor() as cursor:
        cursor.execute("SELECT queue, count(*) FROM awa.rate_ledger GROUP BY queue ORDER BY 1")
        assert cursor.fetchall() == [("default", 1), ("email", 1)]


def test_token_bucket_starts_full_and_refills_at_its_rate():
    now = [0.0]
    bucket = TokenBucket(10.0, 5, clock=lambda: now[0])
    assert bucket.available() == 5
    bucket.spend(5)
    assert bucket.available() == 0
    assert bucket.seconds_until_token() == pytest.approx(0.1)
    now[0] = 0.35
    assert bucket.available() == 3
    now[0] = 100.0
    assert bucket.available() == 5  # never more than the burst


def test_token_bucket_budget_waits_for_a_token():
    bucket = TokenBucket(20.0, 2)
    bucket.spend(2)

    async def main() -> int:
        return await bucket.budget(10, asyncio.Event())

    assert asyncio.run(main()) == 1
