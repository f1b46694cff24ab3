"""Lane marks: a claim of a queue with more than 4 lanes per shard visits the lanes its newest
mark lists and those with commits the mark did not see, never every lane the queue ever had,
and misses no job for it: not one committed by a transaction that was in progress when the mark
was taken, nor one published later in the claiming transaction itself, nor one whose claim
rolled back."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import psycopg
import pytest
from django.db import connection, transaction

import awa_django as awa
from awa_django.declarations.enqueue_options import EnqueueOptions
from awa_django.maintenance.ledgers import LedgerCleaner, LedgerConfig
from awa_django.producer.enqueue import enqueue_at_lane_priority
from awa_django.storage import connections
from tests.conftest import subprocess_database_url
from tests.jobs import noop
from tests.storage.test_hot_path_plans import close_completed

pytestmark = pytest.mark.usefixtures("awa_db")

CLAIM = """
SELECT job_id, priority FROM awa.claim_ready('default', %(limit)s, 'marks-test', 0,
                                             %(aging_s)s, %(sequential)s)
"""
# The columns a closure needs (tests/storage/test_hot_path_plans.py's close_completed).
CLAIM_ATTEMPTS = """
SELECT job_id, run_lease, queue, priority, shard, lane_seq, ready_slot
  FROM awa.claim_ready('default', %(limit)s, 'marks-test', 0, 0, %(sequential)s)
"""
CLAIM_LOCKS_HELD = """
SELECT count(*) FROM pg_locks
 WHERE pid = pg_backend_pid() AND locktype = 'advisory' AND classid = 1096237379
"""
# Enough priorities for lane marks (more than 4 lanes per shard).
MANY = tuple(range(-10, 10))


def claim(limit: int, *, aging_s: float = 0.0, sequential: bool = False) -> list[tuple[int, int]]:
    with connection.cursor() as cursor:
        cursor.execute(CLAIM, {"limit": limit, "aging_s": aging_s, "sequential": sequential})
        return cursor.fetchall()


def claim_attempts(limit: int, *, sequential: bool) -> list[tuple[object, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(CLAIM_ATTEMPTS, {"limit": limit, "sequential": sequential})
        return cursor.fetchall()


def enqueue_at(priority: int, n: int = 0) -> int:
    return enqueue_at_lane_priority(
        noop, args={"n": n}, options=EnqueueOptions(queue="default", priority=priority, eager=False)
    )


def newest_mark() -> list[tuple[int, int]] | None:
    """The lanes (priority, shard) of the queue's newest mark, None without one."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT ARRAY(SELECT ARRAY[x >> 16, x & 65535] FROM unnest(lanes) AS x)"
            " FROM awa.lane_marks WHERE queue = 'default' ORDER BY mark DESC LIMIT 1"
        )
        row = cursor.fetchone()
    return None if row is None else [tuple(lane) for lane in row[0]]


@pytest.fixture
def producer() -> Iterator[psycopg.Connection]:
    """A second session, for a producer whose transaction stays open across claims."""
    with psycopg.connect(subprocess_database_url()) as conn:
        yield conn


def enqueue_sql(conn: psycopg.Connection, priority: int) -> int:
    row = conn.execute(
        "SELECT awa.enqueue_job('tests.noop', 'default', %s::smallint, '{\"n\": 0}', 25, NULL,"
        " '{}', '{}')",
        [priority],
    ).fetchone()
    assert row is not None
    return int(row[0])


def fill_many() -> None:
    """Every lane of MANY used once and drained, so the queue keeps them and has a mark."""
    for priority in MANY:
        enqueue_at(priority)
    assert len(claim(100)) == len(MANY)


def test_lanes_the_claims_drained_leave_the_mark_and_cost_no_lock():
    fill_many()
    assert newest_mark() == []
    busy = [enqueue_at(9, n) for n in range(3)]  # the least urgent lane, visited last
    with transaction.atomic(), connection.cursor() as cursor:
        assert [job_id for job_id, _ in claim(10)] == busy
        cursor.execute(CLAIM_LOCKS_HELD)
        assert cursor.fetchone() == (1,)
    with transaction.atomic(), connection.cursor() as cursor:
        assert claim(10) == []
        cursor.execute(CLAIM_LOCKS_HELD)
        assert cursor.fetchone() == (0,)


def test_priority_order_across_lanes_and_fifo_within_each():
    fill_many()
    expected = []
    for priority in (5, -3, 7, -10, 0):
        expected += [(enqueue_at(priority, n), priority) for n in range(4)]
    expected.sort(key=lambda job: (job[1], job[0]))
    taken = []
    for limit in (3, 1, 5, 2, 100):
        taken += claim(limit)
    assert taken == expected


def test_a_commit_in_progress_when_the_mark_was_taken_is_claimed_once_it_lands(producer):
    fill_many()
    with producer.transaction():
        late = enqueue_sql(producer, 3)  # its transaction id is taken: in progress from here
        enqueue_at(-5)
        assert [priority for _, priority in claim(10)] == [-5]  # a new mark, producer unseen
        assert newest_mark() == []
    assert claim(10) == [(late, 3)]


def test_a_transaction_begun_after_the_mark_is_seen():
    fill_many()
    enqueue_at(-5)
    assert len(claim(10)) == 1
    assert claim(10) == []
    later = [enqueue_at(priority) for priority in (4, 8)]
    assert [job_id for job_id, _ in claim(10)] == later


def test_a_claim_that_rolls_back_leaves_its_jobs_and_its_mark_behind():
    fill_many()
    jobs = [enqueue_at(2, n) for n in range(3)]
    with pytest.raises(RuntimeError), transaction.atomic():
        assert [job_id for job_id, _ in claim(10)] == jobs
        raise RuntimeError("the claiming transaction fails")
    assert [job_id for job_id, _ in claim(10)] == jobs


def test_the_claiming_transaction_publishing_more_later_is_seen_by_its_own_claims():
    # What an in-process run does inside a test's transaction: publish, claim, publish again.
    fill_many()
    with transaction.atomic(), connection.cursor() as cursor:
        first = enqueue_at(6)
        cursor.execute("SET CONSTRAINTS awa.ready_entries_publish IMMEDIATE")
        assert claim(10) == [(first, 6)]
        second = enqueue_at(6)
        cursor.execute("SET CONSTRAINTS awa.ready_entries_publish IMMEDIATE")
        assert claim(10) == [(second, 6)]
    third = enqueue_at(6)
    assert claim(10) == [(third, 6)]


def test_a_lane_whose_rows_were_all_cancelled_leaves_the_mark_until_it_publishes_again():
    fill_many()
    cancelled = enqueue_at(1)
    assert awa.cancel(cancelled, reason="not needed")
    assert claim(10) == []
    assert newest_mark() == []
    again = enqueue_at(1)
    assert claim(10) == [(again, 1)]


def test_a_sequential_lane_waiting_for_its_open_attempt_stays_in_the_mark():
    fill_many()  # its claims stay open: use lanes of their own
    first, second = enqueue_at(50, 1), enqueue_at(50, 2)
    (claimed,) = claim_attempts(10, sequential=True)
    assert claimed[0] == first
    other = enqueue_at(-50)
    assert [row[0] for row in claim_attempts(10, sequential=True)] == [other]
    # This claim finds the other lane drained and writes a new mark; lane 50 waits for its
    # attempt, and stays.
    assert claim_attempts(10, sequential=True) == []
    assert newest_mark() == [(50, 0)]
    close_completed([claimed])
    assert [row[0] for row in claim_attempts(10, sequential=True)] == [second]


def test_aging_lets_a_waiting_low_priority_head_ahead_of_fresh_urgent_work():
    fill_many()
    old = enqueue_at(9)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE awa.ready_entries SET run_at = now() - interval '1 hour' WHERE job_id = %s",
            [old],
        )
    # Aged an hour at one step a minute, the head reaches 1, the most urgent native priority.
    fresh = [enqueue_at(priority) for priority in (4, 6)]
    assert claim(1, aging_s=60) == [(old, 9)]
    assert [job_id for job_id, _ in claim(10, aging_s=60)] == fresh


def test_the_leader_keeps_only_each_queues_newest_mark():
    fill_many()
    for priority in (1, 2, 3):
        enqueue_at(priority)
        assert len(claim(10)) == 1
    newest = newest_mark()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.lane_marks")
        assert cursor.fetchone()[0] > 1

    async def clean() -> int:
        pool = await connections.open_pool("default", max_size=2)
        try:
            cleaner = LedgerCleaner(pool, LedgerConfig(interval_s=1, batch_size=2))
            return (await cleaner.run_once()).deleted
        finally:
            await pool.close()

    assert asyncio.run(clean()) > 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.lane_marks")
        assert cursor.fetchone() == (1,)
    assert newest_mark() == newest


HOLES_READ = """
SELECT coalesce(sum(seq_scan + coalesce(idx_scan, 0)), 0) FROM pg_stat_xact_user_tables
 WHERE schemaname = 'awa' AND relname = 'lane_holes'
"""


def test_a_claim_that_takes_a_lanes_last_rows_knows_it_drained_without_its_head():
    fill_many()
    lanes = (-4, -3, 6)
    taken = sorted((enqueue_at(priority, n), priority) for priority in lanes for n in range(2))
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(HOLES_READ)
        before = cursor.fetchone()[0]
        assert sorted(claim(100)) == taken
        cursor.execute(HOLES_READ)
        # Each lane visited reads whether it has holes once (the visit's first statement); that
        # the claim took its last rows is known from the claim's own receipt, with no read of
        # the lane's head (awa.lane_head reads the holes again).
        assert cursor.fetchone()[0] - before == len(lanes)
    # And the next mark leaves every one of them out.
    assert newest_mark() == []
