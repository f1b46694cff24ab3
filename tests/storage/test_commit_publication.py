"""Producers publish their jobs as they commit (docs/architecture.md#enqueue): real concurrent
transactions on real PostgreSQL, never waiting for each other nor deadlocking, a lane never
claimed past a producer that is still committing, failures at commit stepped over, savepoints,
reads inside the enqueueing transaction, and NOTIFY only for a worker that waits."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from django.db import DatabaseError, OperationalError, connection, connections, transaction

import awa_django as awa
from awa_django.core.claimed_job import ClaimedJob, claimed_job_rows
from awa_django.storage.connections import connect, connection_kwargs
from awa_django.storage.queue import ClaimRequest, claim_ready
from awa_django.storage.statement import run_async
from tests.jobs import noop

pytestmark = pytest.mark.usefixtures("awa_db")

# A deferred constraint trigger of the test's own, fired at commit after awa's (it is queued
# later), to hold a producer mid-commit or make its commit fail once its position is drawn.
AT_COMMIT_DDL = """
CREATE TABLE IF NOT EXISTS tests_at_commit (id bigserial PRIMARY KEY, action text NOT NULL);
CREATE OR REPLACE FUNCTION tests_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.action = 'fail' THEN
        RAISE EXCEPTION 'a later constraint failed';
    END IF;
    PERFORM pg_sleep(substr(NEW.action, 7)::double precision);  -- 'sleep <seconds>'
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS tests_at_commit ON tests_at_commit;
CREATE CONSTRAINT TRIGGER tests_at_commit AFTER INSERT ON tests_at_commit
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION tests_at_commit();
"""


@pytest.fixture
def at_commit() -> Iterator[Callable[[str], None]]:
    with connection.cursor() as cursor:
        cursor.execute(AT_COMMIT_DDL)

    def queue_action(action: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO tests_at_commit (action) VALUES (%s)", [action])

    yield queue_action
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE tests_at_commit; DROP FUNCTION tests_at_commit()")


def put(n: int, queue: str = "default", priority: int | None = None) -> int:
    return awa.enqueue(noop, args={"n": n}, queue=queue, priority=priority)


def claim(queue: str = "default", limit: int = 100) -> list[ClaimedJob]:
    async def main() -> list[ClaimedJob]:
        async with await connect("default") as conn:
            return await run_async(
                conn,
                claim_ready(
                    ClaimRequest(queue=queue, claimed_by="test", deadline_s=0, aging_s=0),
                    rows=claimed_job_rows,
                    limit=limit,
                ),
            )

    return asyncio.run(main())


def claimed_ids(queue: str = "default") -> list[int]:
    return [job.job_id for job in claim(queue)]


class Producer(threading.Thread):
    """A transaction on its own connection that runs ``body`` and then waits for ``release``
    before it commits (or, with ``rollback``, rolls back)."""

    def __init__(self, body: Callable[[], Any], *, rollback: bool = False) -> None:
        super().__init__(daemon=True)
        self.body = body
        self.rollback = rollback
        self.ready = threading.Event()
        self.release = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self.backend_pid = 0
        self.committed_in = 0.0

    def run(self) -> None:
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_backend_pid()")
                    self.backend_pid = cursor.fetchone()[0]
                self.result = self.body()
                self.ready.set()
                assert self.release.wait(20)
                started = time.monotonic()
                if self.rollback:
                    transaction.set_rollback(True)
            self.committed_in = time.monotonic() - started
        except BaseException as error:
            self.error = error
        finally:
            self.ready.set()
            connections.close_all()

    def finish(self) -> Any:
        self.release.set()
        self.join(30)
        assert not self.is_alive()
        return self.result


def test_an_open_producer_transaction_neither_blocks_nor_delays_another_on_its_lane():
    held = Producer(lambda: noop.enqueue(n=1))
    held.start()
    assert held.ready.wait(10)
    # Same lane, committed while the first producer's transaction is still open.
    started = time.monotonic()
    later = noop.enqueue(n=2)
    assert time.monotonic() - started < 1.0
    assert claimed_ids() == [later]
    first = held.finish()
    assert held.error is None
    assert claimed_ids() == [first]


def test_two_producers_enqueueing_two_queues_in_opposite_orders_both_commit():
    """The shape that deadlocked when lanes were locked at the enqueue call: each transaction
    holds one lane and then enqueues to the other's."""
    for round_ in range(2):  # first use of both lanes (creating them), then existing lanes
        barrier = threading.Barrier(2, timeout=10)

        def both(
            first: str, second: str, n: int = round_, barrier: threading.Barrier = barrier
        ) -> list[int]:
            ids = [put(n, first)]
            barrier.wait()
            ids.append(put(n, second))
            barrier.wait()
            return ids

        a = Producer(lambda: both("default", "email"))
        b = Producer(lambda: both("email", "default"))
        a.start()
        b.start()
        assert a.ready.wait(10) and b.ready.wait(10)
        a.release.set()
        b.release.set()
        a.finish()
        b.finish()
        assert a.error is None and b.error is None, (a.error, b.error)
        assert sorted(claimed_ids("default")) == sorted([a.result[0], b.result[1]])
        assert sorted(claimed_ids("email")) == sorted([a.result[1], b.result[0]])


def test_many_producers_in_random_lane_orders_never_wait_for_each_other_or_deadlock():
    errors: list[BaseException] = []
    committed: list[int] = []
    lanes = [("default", 1), ("default", 2), ("email", 1), ("email", 3)]

    def produce(seed: int) -> None:
        import random

        rng = random.Random(seed)
        try:
            for _ in range(15):
                with transaction.atomic():
                    ids = []
                    for queue, priority in rng.sample(lanes, rng.randint(2, 4)):
                        ids.append(put(seed, queue, priority))
                        with connection.cursor() as cursor:
                            cursor.execute("SELECT pg_sleep(0.002)")
                committed.extend(ids)
        except DatabaseError as error:
            errors.append(error)
        finally:
            connections.close_all()

    # Lanes are created on first use, one creator at a time: that wait is not the one tested.
    for queue, priority in lanes:
        committed.append(put(0, queue, priority))
    threads = [threading.Thread(target=produce, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    waits = 0
    with psycopg.connect(**connection_kwargs("default"), autocommit=True) as watcher:
        while any(thread.is_alive() for thread in threads):
            # Producers waiting on a lock another producer holds: none ever should. (Relation
            # extension, 'extend', is the server allocating pages, not one producer waiting
            # for another's transaction.)
            waits += watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND wait_event <> 'extend' AND datname = current_database()"
            ).fetchone()[0]
            time.sleep(0.005)
    for thread in threads:
        thread.join()
    assert errors == []
    assert waits == 0
    claimed = [job.job_id for queue in ("default", "email") for job in claim(queue, 1000)]
    assert sorted(claimed) == sorted(committed)


def used_lane(queue: str = "default") -> None:
    """Create the lane (its first use waits for any other first use, once) and drain it."""
    put(0, queue)
    assert len(claim(queue)) == 1


def test_a_lane_is_never_claimed_past_a_producer_that_is_still_committing(at_commit):
    used_lane()

    def enqueue_then_commit_slowly() -> int:
        job_id = noop.enqueue(n=1)
        at_commit("sleep 1.5")  # runs after awa has published, inside the commit
        return job_id

    slow = Producer(enqueue_then_commit_slowly)
    slow.start()
    assert slow.ready.wait(10)
    slow.release.set()
    # The slow producer has its position now and is still committing; this one comes after.
    time.sleep(0.3)
    later = noop.enqueue(n=2)
    assert claimed_ids() == []
    first = slow.finish()
    assert slow.error is None and slow.committed_in >= 1.0
    assert claimed_ids() == [first, later]


def test_a_position_whose_producer_failed_at_commit_is_stepped_over(at_commit):
    used_lane()

    def enqueue_then_fail_at_commit() -> int:
        job_id = noop.enqueue(n=1)
        at_commit("fail")
        return job_id

    failed = Producer(enqueue_then_fail_at_commit)
    failed.start()
    failed.finish()
    assert isinstance(failed.error, DatabaseError)
    later = noop.enqueue(n=2)
    with connection.cursor() as cursor:
        cursor.execute("SELECT commit_seq FROM awa.lane_commits WHERE queue = 'default' ORDER BY 1")
        # The failed producer's position (2) is missing: its commit aborted after drawing it.
        assert [row[0] for row in cursor.fetchall()] == [1, 3]
    assert awa.get_job(failed.result) is None
    assert claimed_ids() == [later]


def test_a_statement_timeout_the_caller_set_does_not_cut_the_commit(at_commit):
    """PostgreSQL lifts statement_timeout before it commits, so the commit-time publication
    (here held up by a slower constraint after it) is never cancelled half way."""
    used_lane()
    started = time.monotonic()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL statement_timeout = '200ms'")
        job_id = put(1)
        at_commit("sleep 0.6")
    assert time.monotonic() - started >= 0.6
    assert claimed_ids() == [job_id]


def test_a_publish_error_names_the_job_and_queue_and_rolls_back_the_business_rows():
    """A lock_timeout the caller set applies to the commit: here awa's commit-time write cannot
    have its table, and the whole transaction, business row included, rolls back."""
    blocker = psycopg.connect(**connection_kwargs("default"))
    try:
        blocker.execute("LOCK TABLE awa.lane_commits IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(OperationalError) as raised, transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '200ms'")
                cursor.execute("INSERT INTO tests_job_runs (note) VALUES ('business row')")
            job_id = noop.enqueue(n=1)
        message = str(raised.value)
        assert f"could not publish job {job_id} of queue default at commit" in message
        assert "lock timeout" in message
        assert raised.value.__cause__.sqlstate == "55P03"  # lock_not_available, kept
    finally:
        blocker.close()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM tests_job_runs WHERE note = 'business row'")
        assert cursor.fetchone() == (0,)
    assert awa.get_job(job_id) is None
    later = noop.enqueue(n=2)
    assert claimed_ids() == [later]


def test_a_producer_killed_before_it_commits_publishes_nothing_and_stalls_nothing():
    used_lane()
    doomed = Producer(lambda: noop.enqueue(n=1))
    doomed.start()
    assert doomed.ready.wait(10)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [doomed.backend_pid])
    doomed.finish()
    assert doomed.error is not None
    later = noop.enqueue(n=2)
    assert awa.get_job(doomed.result) is None
    assert claimed_ids() == [later]


def test_savepoints_publish_what_was_released_and_nothing_that_rolled_back():
    with transaction.atomic():
        kept = noop.enqueue(n=1)
        try:
            with transaction.atomic():
                dropped = noop.enqueue(n=2)
                raise RuntimeError
        except RuntimeError:
            pass
        with transaction.atomic():
            released = noop.enqueue(n=3)
        after = noop.enqueue(n=4)
    assert awa.get_job(dropped) is None
    assert claimed_ids() == [kept, released, after]


def test_the_enqueueing_transaction_reads_its_job_before_it_commits():
    with transaction.atomic():
        job_id = noop.enqueue(n=1)
        job = awa.get_job(job_id)
        assert job is not None and job.state == "available"
        # Nobody else can claim it yet.
        assert claimed_ids() == []
    assert claimed_ids() == [job_id]


def test_jobs_enqueued_after_an_early_publication_get_a_position_of_their_own():
    """SET CONSTRAINTS ... IMMEDIATE (as Django's TestCase does) publishes what was enqueued so
    far; later enqueues of the same transaction are published at its commit, each row once."""
    with transaction.atomic():
        first = [noop.enqueue(n=i) for i in range(2)]
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")
        batch = noop.enqueue_many([{"n": i} for i in range(2, 5)])
        last = noop.enqueue(n=5)
    assert claimed_ids() == [*first, *batch, last]
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.lane_commits WHERE queue = 'default'")
        assert cursor.fetchone() == (2,)


def test_a_commit_notifies_only_while_a_worker_waits_for_the_queue():
    listener = psycopg.connect(**connection_kwargs("default"), autocommit=True)
    waiter = psycopg.connect(**connection_kwargs("default"), autocommit=True)
    try:
        listener.execute("LISTEN awa")

        def notified() -> list[str]:
            return [n.payload for n in listener.notifies(timeout=0.3)]

        noop.enqueue(n=1)
        assert notified() == []
        # What a waiting worker holds (awa_django/worker/wake.py).
        waiter.execute("SELECT pg_advisory_lock(1096237385, hashtext('default'))")
        noop.enqueue(n=2)
        put(3, "email")
        assert notified() == ["default"]
        waiter.execute("SELECT pg_advisory_unlock(1096237385, hashtext('default'))")
        noop.enqueue(n=4)
        assert notified() == []
    finally:
        listener.close()
        waiter.close()
