"""Storage functions against real PostgreSQL: lanes, claims, the run_lease guard, promotion."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from psycopg import AsyncConnection

import awa_django as awa
from awa_django.core.claimed_job import ClaimedJob, claimed_job_rows
from awa_django.core.completion import Completion
from awa_django.core.outcome import Outcome
from awa_django.storage.backlog import promote_due, seconds_until_next_due
from awa_django.storage.connections import connect
from awa_django.storage.execution import close_attempts
from awa_django.storage.queue import ClaimRequest, claim_ready
from awa_django.storage.statement import run_async

pytestmark = pytest.mark.usefixtures("awa_db", "storage_kinds")


def run(coro_fn, *args: Any, **kwargs: Any):
    async def main():
        conn = await connect("default")
        async with conn:
            return await coro_fn(conn, *args, **kwargs)

    return asyncio.run(main())


def claim(
    queue: str = "default", limit: int = 100, who: str = "test", deadline_s: float = 0
) -> list[ClaimedJob]:
    request = ClaimRequest(queue=queue, claimed_by=who, deadline_s=deadline_s)
    return run(run_async, claim_ready(request, rows=claimed_job_rows, limit=limit))


def completion(
    job: ClaimedJob, outcome: Outcome = Outcome.COMPLETED, **overrides: Any
) -> Completion:
    if "run_lease" in overrides:
        job = dataclasses.replace(job, run_lease=overrides.pop("run_lease"))
    return Completion.of(job, outcome, **overrides)


def close(*completions: Completion) -> set[tuple[int, int]]:
    return set(run(run_async, close_attempts(list(completions))))


async def promote(conn: AsyncConnection[Any], *, limit: int) -> int:
    return sum([await run_async(conn, statement) for statement in promote_due(limit=limit)])


def test_claim_is_fifo_within_a_lane():
    ids = [awa.enqueue("k.fifo", args={"i": i}) for i in range(10)]
    first = claim(limit=4)
    rest = claim(limit=100)
    assert [j.job_id for j in first + rest] == ids
    assert claim() == []


def test_higher_priority_is_claimed_first():
    low = awa.enqueue("k.p", args={}, priority=4)
    normal = awa.enqueue("k.p", args={}, priority=2)
    urgent = awa.enqueue("k.p", args={}, priority=1)
    assert [j.job_id for j in claim()] == [urgent, normal, low]


def test_claim_increments_attempt_and_lease_and_records_the_claimer():
    job_id = awa.enqueue("k.x", args={"a": 1}, metadata={"m": 1}, tags=["t"])
    (job,) = claim(who="worker-a")
    assert (job.job_id, job.attempt, job.run_lease, job.args, job.metadata, job.tags) == (
        job_id,
        1,
        1,
        {"a": 1},
        {"m": 1},
        ["t"],
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT claimed_by FROM awa.claim_receipts WHERE job_id = %s", [job_id])
        assert cursor.fetchone() == ("worker-a",)
    assert awa.get_job(job_id).state == "running"


def test_claims_are_per_queue_and_paused_queues_are_skipped():
    default_job = awa.enqueue("k.q", args={})
    email_job = awa.enqueue("k.q", args={}, queue="email")
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO awa.queue_meta (queue, paused) VALUES ('email', true)")
    assert [j.job_id for j in claim("email")] == []
    assert [j.job_id for j in claim("default")] == [default_job]
    with connection.cursor() as cursor:
        cursor.execute("UPDATE awa.queue_meta SET paused = false WHERE queue = 'email'")
    assert [j.job_id for j in claim("email")] == [email_job]


def test_tombstoned_ready_row_is_never_claimed():
    doomed = awa.enqueue("k.t", args={})
    kept = awa.enqueue("k.t", args={})
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.ready_tombstones "
            "(queue, priority, shard, lane_seq, ready_slot, job_id, reason) "
            "SELECT queue, priority, shard, lane_seq, ready_slot, job_id, 'test' "
            "FROM awa.ready_entries "
            "WHERE job_id = %s",
            [doomed],
        )
    assert [j.job_id for j in claim()] == [kept]
    assert awa.get_job(doomed).state == "cancelled"


def test_completion_closes_once_and_a_stale_completion_changes_nothing():
    job_id = awa.enqueue("k.c", args={})
    (job,) = claim()
    assert close(completion(job)) == {(job_id, 1)}
    # The same attempt closed again (e.g. by a late duplicate) is rejected.
    assert close(completion(job, Outcome.FAILED, error={"message": "late"})) == set()
    record = awa.get_job(job_id)
    assert (record.state, record.errors) == ("completed", [])


def test_completion_for_an_older_lease_is_stale_after_retry():
    job_id = awa.enqueue("k.r", args={}, max_attempts=5)
    (first,) = claim()
    assert close(
        completion(first, Outcome.RETRYABLE, delay_s=-1, error={"message": "try again"})
    ) == {(job_id, 1)}
    assert run(promote, limit=10) == 1
    (second,) = claim()
    assert (second.job_id, second.run_lease, second.attempt) == (job_id, 2, 2)
    # The first attempt's worker reports success late: its lease is gone.
    assert close(completion(first)) == set()
    stale_free = close(completion(second, Outcome.FAILED, error={"message": "final"}))
    assert stale_free == {(job_id, 2)}
    record = awa.get_job(job_id)
    assert record.state == "failed"
    assert [e["message"] for e in record.errors] == ["try again", "final"]


def test_a_batch_of_every_outcome_closes_each_attempt_once():
    # The writes for attempts that did not complete run in a statement of their own after
    # the closures (migration 0038), over exactly the attempts this close closed: not one that
    # another closer (a rescue) closed first, whose item here is stale.
    ids = [awa.enqueue("k.m", args={"n": n}, max_attempts=5) for n in range(5)]
    done, retried, snoozed, failed, raced = claim()
    rescued = completion(raced, Outcome.RETRYABLE, delay_s=-1, error={"message": "rescued"})
    assert close(rescued) == {(ids[4], 1)}
    closed = close(
        completion(done),
        completion(retried, Outcome.RETRYABLE, delay_s=-1, error={"message": "again"}),
        completion(snoozed, Outcome.SNOOZED, delay_s=-1, progress={"step": 2}),
        completion(failed, Outcome.FAILED, error={"message": "final"}),
        completion(raced, Outcome.RETRYABLE, delay_s=-1, error={"message": "late"}),
    )
    assert closed == {(job_id, 1) for job_id in ids[:4]}
    states = [awa.get_job(job_id).state for job_id in ids]
    assert states == ["completed", "retryable", "scheduled", "failed", "retryable"]
    assert [e["message"] for e in awa.get_job(ids[4]).errors] == ["rescued"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT job_id, attempt FROM awa.deferred_jobs ORDER BY job_id")
        assert cursor.fetchall() == [(ids[1], 1), (ids[2], 0), (ids[4], 1)]
        cursor.execute("SELECT job_id, progress ->> 'step' FROM awa.attempt_state")
        assert cursor.fetchall() == [(ids[2], "2")]


def test_completion_with_the_wrong_lease_for_the_receipt_is_rejected():
    awa.enqueue("k.w", args={})
    (job,) = claim()
    assert close(completion(job, run_lease=job.run_lease + 1)) == set()
    assert close(completion(job, run_lease=job.run_lease - 1)) == set()
    assert awa.get_job(job.job_id).state == "running"


def test_snooze_gives_the_attempt_back():
    job_id = awa.enqueue("k.s", args={}, max_attempts=1)
    (job,) = claim()
    close(completion(job, Outcome.SNOOZED, delay_s=-1))
    assert awa.get_job(job_id).state == "scheduled"
    run(promote, limit=10)
    (again,) = claim()
    assert (again.attempt, again.run_lease) == (1, 2)


def test_promotion_respects_run_at_and_keeps_identity():
    due = awa.enqueue("k.d", args={"a": 1}, run_at=timedelta(milliseconds=500))
    later = awa.enqueue("k.d", args={"a": 2}, run_at=timedelta(hours=1))
    assert claim() == []
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(0.6)")
    assert run(promote, limit=10) == 1
    (job,) = claim()
    assert (job.job_id, job.args, job.attempt, job.run_lease) == (due, {"a": 1}, 1, 1)
    assert awa.get_job(later).state == "scheduled"
    wait = run(run_async, seconds_until_next_due(queues=["default"]))
    assert 3500 < wait <= 3600
    assert run(run_async, seconds_until_next_due(queues=["email"])) is None


def test_promotion_skips_paused_queues():
    awa.enqueue("k.d", args={}, run_at=timedelta(milliseconds=500), queue="email")
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO awa.queue_meta (queue, paused) VALUES ('email', true)")
        cursor.execute("SELECT pg_sleep(0.6)")
    assert run(promote, limit=10) == 0


def test_promotion_uses_the_partial_indexes():
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.deferred_jobs (job_id, state, kind, queue, priority, args, attempt, "
            "run_lease, max_attempts, run_at, created_at, metadata, tags, errors) "
            "SELECT g, CASE WHEN g % 2 = 0 THEN 'scheduled' ELSE 'retryable' END, "
            "'k', 'default', 2, "
            "'{}', 0, 0, 1, now() + interval '1 day', now(), '{}', '{}', '[]' "
            "FROM generate_series(1000000, 1020000) g"
        )
        cursor.execute("ANALYZE awa.deferred_jobs")
        cursor.execute(
            "EXPLAIN SELECT job_id FROM awa.deferred_jobs WHERE state = 'scheduled' "
            "AND run_at <= now() ORDER BY run_at, job_id LIMIT 1000"
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "deferred_jobs_scheduled_due" in plan


def test_promotion_and_claims_pass_a_producer_whose_transaction_is_still_open():
    """A transaction that enqueued and stays open holds nothing on the lane: promotion moves
    due jobs into it and they are claimed; the open transaction's job follows once it commits."""
    import threading

    from django.db import connections, transaction

    holding = threading.Event()
    release = threading.Event()
    late: list[int] = []

    def producer() -> None:
        try:
            with transaction.atomic():
                late.append(awa.enqueue("k.d", args={}))
                holding.set()
                release.wait(10)
        finally:
            connections.close_all()

    thread = threading.Thread(target=producer)
    thread.start()
    try:
        assert holding.wait(10)
        due = awa.enqueue("k.d", args={}, run_at=timedelta(milliseconds=300))
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(0.4)")
        assert run(promote, limit=10) == 1
        assert awa.get_job(due).state == "available"
        assert [job.job_id for job in claim()] == [due]
    finally:
        release.set()
        thread.join(10)
    assert [job.job_id for job in claim()] == late


def test_next_due_ignores_paused_queues():
    awa.enqueue("k.d", args={}, queue="email", run_at=timedelta(seconds=5))
    assert run(run_async, seconds_until_next_due(queues=["email"])) is not None
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO awa.queue_meta (queue, paused) VALUES ('email', true)")
    assert run(run_async, seconds_until_next_due(queues=["email"])) is None


def test_a_claim_that_finds_nothing_takes_no_transaction_id():
    # Idle workers poll with empty claims: a transaction id would make each one end in a WAL
    # flush on a durable server (as the row lock on queue_lanes that claims used to take did).
    awa.enqueue("tests.noop", args={"n": 0})
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.claim_ready('default', 10, 'w', 0, 0, false)")
        assert cursor.fetchone() == (1,)
        with transaction.atomic():
            cursor.execute("SELECT count(*) FROM awa.claim_ready('default', 10, 'w', 0, 0, false)")
            assert cursor.fetchone() == (0,)
            cursor.execute("SELECT txid_current_if_assigned()")
            assert cursor.fetchone() == (None,)
