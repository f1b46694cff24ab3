"""Priority aging: a waiting job's effective priority rises one step per aging interval, computed
at claim time; ready rows are never rewritten."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

import awa_django as awa
from awa_django.core.claimed_job import ClaimedJob, claimed_job_rows
from awa_django.storage.connections import connect
from awa_django.storage.queue import ClaimRequest, claim_ready
from awa_django.storage.statement import run_async
from tests.conftest import run_burst

pytestmark = pytest.mark.usefixtures("awa_db", "storage_kinds")


def claim(limit: int, aging_s: float) -> list[ClaimedJob]:
    async def main() -> list[ClaimedJob]:
        async with await connect("default") as conn:
            return await run_async(
                conn,
                claim_ready(
                    ClaimRequest(queue="default", claimed_by="test", deadline_s=0, aging_s=aging_s),
                    rows=claimed_job_rows,
                    limit=limit,
                ),
            )

    return asyncio.run(main())


def age(seconds: float) -> None:
    time.sleep(seconds)


def test_an_aged_low_priority_job_is_claimed_ahead_of_newer_urgent_work():
    old_low = awa.enqueue("k.aging", args={"n": 0}, priority=4)
    age(1.6)  # 3 steps of 0.5 s: priority 4 -> 1
    urgent = awa.enqueue("k.aging", args={"n": 1}, priority=1)
    (first,) = claim(limit=1, aging_s=0.5)
    assert first.job_id == old_low
    # The claim reports the job's own priority: aging changed the order, not the row.
    assert first.priority == 4
    (second,) = claim(limit=1, aging_s=0.5)
    assert second.job_id == urgent


def test_without_aging_the_urgent_job_goes_first():
    old_low = awa.enqueue("k.aging", args={"n": 0}, priority=4)
    age(1.6)
    urgent = awa.enqueue("k.aging", args={"n": 1}, priority=1)
    assert [j.job_id for j in claim(limit=2, aging_s=0)] == [urgent, old_low]


def test_a_job_younger_than_the_interval_keeps_its_priority():
    low = awa.enqueue("k.aging", args={}, priority=4)
    urgent = awa.enqueue("k.aging", args={}, priority=1)
    assert [j.job_id for j in claim(limit=2, aging_s=60)] == [urgent, low]


def test_a_batch_takes_only_the_aged_part_of_a_lane_before_more_urgent_work():
    aged = [awa.enqueue("k.aging", args={"n": i}, priority=4) for i in range(2)]
    age(1.6)
    fresh_low = [awa.enqueue("k.aging", args={"n": i}, priority=4) for i in range(2)]
    urgent = [awa.enqueue("k.aging", args={"n": i}, priority=1) for i in range(2)]
    # One claim, one round trip: the aged head of the priority-4 lane, then the urgent lane,
    # and only then the fresh priority-4 rows behind the aged ones (FIFO within the lane holds).
    claimed = [j.job_id for j in claim(limit=10, aging_s=0.5)]
    assert claimed == aged + urgent + fresh_low


def test_aging_rewrites_no_ready_row():
    awa.enqueue("k.aging", args={}, priority=4)
    age(0.5)
    awa.enqueue("k.aging", args={}, priority=1)
    with connection.cursor() as cursor:
        cursor.execute("SELECT array_agg(priority ORDER BY priority) FROM awa.ready_entries")
        before = cursor.fetchone()
    claim(limit=2, aging_s=0.1)
    with connection.cursor() as cursor:
        cursor.execute("SELECT array_agg(priority ORDER BY priority) FROM awa.ready_entries")
        assert cursor.fetchone() == before == ([1, 4],)


def worker_settings(aging_interval_s: float) -> dict[str, Any]:
    return {
        "QUEUES": {
            "default": {"concurrency": 1, "aging_interval_s": aging_interval_s},
            "email": {},
        },
    }


def test_the_worker_applies_the_queue_aging_interval():
    old_low = awa.enqueue("tests.record", args={"n": 4}, priority=4)
    age(1.6)
    urgent = awa.enqueue("tests.record", args={"n": 1}, priority=1)
    with override_settings(AWA=worker_settings(0.5)):
        run_burst(queues={"default": 1})
    with connection.cursor() as cursor:
        cursor.execute("SELECT job_id FROM tests_job_runs ORDER BY id")
        assert [row[0] for row in cursor.fetchall()] == [old_low, urgent]
