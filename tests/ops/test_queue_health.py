"""Queue health: live depths by state, the leader's samples (completed, failed, throughput,
history), pause, resume and drain, against real PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test import override_settings

import awa_django as awa
from awa_django.core.claimed_job import claimed_job_rows
from awa_django.exceptions import ConfirmationRequired, InvalidJob
from awa_django.maintenance.queue_stats import QueueSampler, QueueStatsConfig
from awa_django.ops.queues import queue_stats
from awa_django.sql import queries
from awa_django.storage.connections import connect, open_pool
from awa_django.storage.control import drain_candidates
from awa_django.storage.queue import ClaimRequest, QueueDepth, claim_ready
from awa_django.storage.statement import run, run_async
from tests.conftest import run_burst
from tests.jit_settings import jit_before, show_jit
from tests.jobs import noop, retry_after, terminal

pytestmark = pytest.mark.usefixtures("awa_db")


@pytest.fixture(autouse=True)
def queues_with_dlq():
    with override_settings(AWA={"QUEUES": {"default": {"dlq": True}, "email": {}}}):
        yield


def claim(queue: str, n: int) -> list[int]:
    async def main() -> list[int]:
        async with await connect("default") as conn:
            jobs = await run_async(
                conn,
                claim_ready(
                    ClaimRequest(queue=queue, claimed_by="t", deadline_s=0, aging_s=0),
                    rows=claimed_job_rows,
                    limit=n,
                ),
            )
            return [j.job_id for j in jobs]

    return asyncio.run(main())


def park_on_callback(job_id: int) -> None:
    """Give a running attempt a lease with a callback_id: how a callback wait is stored."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.leases (job_id, run_lease, lease_slot, ready_slot, queue, priority, "
            "shard, lane_seq, claimed_by, callback_id, callback_timeout_at) "
            "SELECT job_id, run_lease, 0, ready_slot, queue, priority, shard, lane_seq, "
            "claimed_by, gen_random_uuid(), now() + interval '1 hour' "
            "FROM awa.claim_receipts WHERE job_id = %s",
            [job_id],
        )


def stats_pass() -> None:
    async def main() -> None:
        pool = await open_pool("default", max_size=1)
        try:
            await QueueSampler(pool, QueueStatsConfig(interval_s=30.0)).run_once()
        finally:
            await pool.close()

    asyncio.run(main())


def by_queue() -> dict[str, awa.queues.QueueStats]:
    return {q.queue: q for q in awa.queues.stats()}


def test_completions_and_failures_count_from_the_first_job_without_a_leader():
    noop.enqueue()
    noop.enqueue()
    awa.enqueue(terminal, queue="email")
    run_burst()
    # No leader has sampled: the closures are read from the ring.
    default, email = by_queue()["default"], by_queue()["email"]
    assert (default.completed_last_hour, default.failed_last_hour) == (2, 0)
    assert default.throughput_per_min == pytest.approx(2 / 5)
    assert (email.completed_last_hour, email.failed_last_hour) == (0, 1)


def test_closures_after_the_newest_sample_are_added_once():
    noop.enqueue()
    run_burst()
    stats_pass()  # counts the first completion
    noop.enqueue()
    awa.enqueue(terminal, queue="email")
    run_burst()  # after the sample: read from the ring
    default, email = by_queue()["default"], by_queue()["email"]
    assert (default.completed_last_hour, email.failed_last_hour) == (2, 1)
    stats_pass()  # now sampled: still counted once
    default, email = by_queue()["default"], by_queue()["email"]
    assert (default.completed_last_hour, email.failed_last_hour) == (2, 1)


def test_stats_count_every_state_from_live_queries_and_samples():
    noop.enqueue()
    awa.enqueue(terminal)  # -> DLQ
    awa.enqueue(terminal, queue="email")  # -> failed
    retry_after.enqueue(seconds=3600)  # -> retryable
    run_burst()
    stats_pass()  # the leader's sample counts the 1 completion and 2 failures
    running, waiting = noop.enqueue(), noop.enqueue()
    assert sorted(claim("default", 2)) == sorted([running, waiting])
    park_on_callback(waiting)
    noop.enqueue()
    noop.enqueue()
    awa.enqueue(noop, run_at=timedelta(hours=1))

    default = by_queue()["default"]
    assert (
        default.available,
        default.scheduled,
        default.retryable,
        default.running,
        default.waiting_external,
        default.dlq,
    ) == (2, 1, 1, 1, 1, 1)
    assert default.pending == 4
    assert default.completed_last_hour == 1  # retry_after's attempt closed as retryable
    assert default.failed_last_hour == 1
    assert default.throughput_per_min == pytest.approx(1 / 5)
    assert default.lag_s >= 0 and default.declared and default.dlq_enabled
    email = by_queue()["email"]
    assert (email.failed_last_hour, email.dlq, email.dlq_enabled) == (1, 0, False)


def view_counts(state: str) -> dict[str, int]:
    """Jobs per queue in ``state`` as the awa.jobs view tells them: the truth the depths,
    which read only what waits after each lane's claim cursor, must equal."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT queue, count(*) FROM awa.jobs WHERE state = %s GROUP BY queue", [state]
        )
        return dict(cursor.fetchall())


def test_the_live_depths_are_planned_without_jit_and_the_setting_is_put_back():
    noop.enqueue()
    server_setting = show_jit()
    # PostgreSQL's default: the read itself must turn JIT off.
    assert server_setting == "on"
    with transaction.atomic():
        with jit_before("awa.waiting_entries(NULL)") as seen:
            assert [s.queue for s in awa.queues.stats()] == ["default", "email"]
        assert show_jit() == server_setting
    assert seen == ["off"]


def test_live_depths_and_the_drain_count_equal_the_jobs_in_each_state():
    """Claims (closed and open), cancels (tombstones) between waiting rows, a commit claimed
    half way, a second lane (priority), and a paused queue: every live depth and the drain
    confirmation's count equal the jobs of that state, and the drain cancels that many."""
    done = noop.enqueue()
    run_burst()
    batch = awa.enqueue_many(noop, [{} for _ in range(6)])
    claim("default", 2)  # the cursor stops inside the batch's commit
    awa.cancel(batch[3])
    urgent = [awa.enqueue(noop, priority=1) for _ in range(3)]
    awa.cancel(urgent[1])
    awa.enqueue(noop, run_at=timedelta(hours=1))
    awa.queues.pause("email")
    for _ in range(4):
        awa.enqueue(noop, queue="email")
    awa.cancel(awa.enqueue(noop, queue="email"))
    assert awa.get_job(done).state == "completed"

    depths = by_queue()
    assert {q: d.available for q, d in depths.items() if d.available} == view_counts("available")
    assert {q: d.running for q, d in depths.items() if d.running} == view_counts("running")
    assert (depths["default"].available, depths["email"].available) == (5, 4)
    with connection.cursor() as cursor:
        cursor.execute(queries("lanes")["lane_backlog"], {"queue": None})
        backlog = cursor.fetchall()
    assert sum(row[3] for row in backlog) == 9
    with connection.cursor() as cursor:
        for queue, pending in (("default", 6), ("email", 4)):
            assert run(cursor, drain_candidates(queue=queue)) == pending
    assert awa.queues.drain("email", confirm=True) == 4
    assert awa.queues.drain("default", confirm=True) == 6
    assert view_counts("available") == {}
    assert by_queue()["default"].running == 2


def test_history_returns_the_leaders_samples_oldest_first():
    noop.enqueue()
    stats_pass()
    run_burst()
    stats_pass()
    samples = awa.queues.history("default")
    assert [(s.available, s.completed) for s in samples] == [(1, 0), (0, 1)]
    assert samples[0].sampled_at < samples[1].sampled_at
    assert awa.queues.history("email") == []


def test_a_sample_is_the_queues_depths_when_taken():
    noop.enqueue()
    awa.enqueue(noop, run_at=timedelta(hours=1))
    stats_pass()
    (sample,) = awa.queues.history("default")
    # What queue_stats reads of a live depth, it reads of a sample.
    assert isinstance(sample, QueueDepth)
    depths = queue_stats("default", "default", sample, None, None, {})
    live = by_queue()["default"]
    assert (depths.available, depths.scheduled, depths.running, depths.dlq) == (1, 1, 0, 0)
    assert (depths.available, depths.scheduled) == (live.available, live.scheduled)


def test_pause_stops_claims_until_resume():
    awa.queues.pause("default", by="alice")
    job_id = noop.enqueue()
    run_burst()
    paused = by_queue()["default"]
    assert paused.paused and paused.paused_by == "alice" and paused.available == 1
    assert awa.get_job(job_id).state == "available"
    awa.queues.resume("default")
    run_burst()
    assert awa.get_job(job_id).state == "completed"
    assert not by_queue()["default"].paused
    with pytest.raises(InvalidJob, match="unknown queue"):
        awa.queues.pause("nope")


def test_drain_needs_confirmation_and_cancels_only_pending_jobs():
    running = noop.enqueue()
    claim("default", 1)
    available = noop.enqueue()
    scheduled = awa.enqueue(noop, run_at=timedelta(hours=1))
    other = noop.enqueue()
    awa.enqueue(noop, queue="email")
    with pytest.raises(ConfirmationRequired):
        awa.queues.drain("default")
    assert awa.get_job(available).state == "available"

    assert awa.queues.drain("default", confirm=True) == 3
    states = {j.job_id: j.state for j in awa.get_jobs([running, available, scheduled, other])}
    assert states == {
        running: "running",
        available: "cancelled",
        scheduled: "cancelled",
        other: "cancelled",
    }
    assert by_queue()["email"].available == 1
