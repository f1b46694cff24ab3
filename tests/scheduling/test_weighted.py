"""Weighted concurrency: one limit per worker process shared by its queues, idle capacity lent to
busy queues and given back as soon as a queue with a minimum has work."""

from __future__ import annotations

import asyncio
import time

import pytest
from django.db import connection
from django.test import override_settings

import awa_django as awa
from awa_django.worker.weighted import QueueShare, WeightedPermits
from tests.conftest import BackgroundWorker, wait_until

WEIGHTED = {
    "WORKER_CONCURRENCY": 10,
    "QUEUES": {
        "default": {"min_concurrency": 5, "weight": 1},
        "email": {"min_concurrency": 5, "weight": 1},
    },
}


def running() -> dict[str, int]:
    """Open attempts per queue (a claim receipt without its closure)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.queue, count(*) FROM awa.claim_receipts c WHERE NOT EXISTS ("
            "SELECT 1 FROM awa.done_entries d WHERE d.job_id = c.job_id "
            "AND d.run_lease = c.run_lease AND d.ready_slot = c.ready_slot) GROUP BY c.queue"
        )
        return dict(cursor.fetchall())


@pytest.mark.usefixtures("awa_db")
def test_a_busy_queue_borrows_idle_capacity_and_gives_it_back_within_a_claim_cycle():
    with override_settings(AWA=WEIGHTED):
        awa.enqueue_many("tests.sleepy", [{"seconds": 0.3}] * 400, queue="default")
        worker = BackgroundWorker().start()
        try:
            # email is idle: default runs on the whole process limit, not just its minimum.
            wait_until(lambda: running().get("default") == 10, timeout=10)
            awa.enqueue_many("tests.sleepy", [{"seconds": 0.3}] * 30, queue="email")
            got_work = time.monotonic()
            # Nothing is pre-empted: email gets its five as default's 0.3 s jobs finish, because
            # from its first claim cycle on default is held to its share.
            wait_until(lambda: running() == {"default": 5, "email": 5}, timeout=10, interval=0.01)
            assert time.monotonic() - got_work < 2.0
            # Once email has drained, default borrows the whole limit again.
            wait_until(lambda: running() == {"default": 10}, timeout=20, interval=0.01)
        finally:
            worker.stop()


def reserve(permits: WeightedPermits, queue: str, n: int) -> int:
    async def main() -> int:
        return await asyncio.wait_for(permits.reserve(queue, n, asyncio.Event()), 0.2)

    try:
        return asyncio.run(main())
    except TimeoutError:
        return 0


def test_minimums_are_held_back_for_a_queue_that_has_work():
    permits = WeightedPermits(10, {"a": QueueShare(5, 1), "b": QueueShare(5, 1)})
    assert reserve(permits, "a", 100) == 10  # b has no work: everything is lent
    permits.release("a", 3)
    assert reserve(permits, "b", 100) == 3  # b has work now; a is above its share
    permits.release("a", 2)
    assert reserve(permits, "a", 100) == 0  # the two freed permits are b's minimum
    assert reserve(permits, "b", 100) == 2
    assert permits.in_use == {"a": 5, "b": 5}
    permits.settle("b", 5, 0)  # b's claim found nothing: it lends again
    assert reserve(permits, "a", 100) == 5


def test_spare_capacity_is_shared_by_weight():
    permits = WeightedPermits(12, {"a": QueueShare(0, 3), "b": QueueShare(0, 1)})
    assert reserve(permits, "a", 1) == 1
    assert permits.cap("a") == 12  # alone with work
    assert reserve(permits, "b", 100) == 3
    assert (permits.cap("a"), permits.cap("b")) == (9, 3)
    assert reserve(permits, "a", 100) == 8
