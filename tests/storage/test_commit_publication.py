"""Producers publish their jobs as they commit (docs/architecture.md#enqueue): real concurrent
transactions on real PostgreSQL, never waiting for each other nor deadlocking, a lane never
claimed past a producer that is still committing, failures at commit stepped over, savepoints,
reads inside the enqueueing transaction, and NOTIFY only for a worker that waits."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from django.db import DatabaseError, OperationalError, connection, connections, transaction
from psycopg.rows import dict_row

import awa_django as awa
from awa_django.core.claimed_job import ClaimedJob, claimed_job_rows
from awa_django.core.completion import Completion
from awa_django.core.outcome import Outcome
from awa_django.declarations.enqueue_options import EnqueueOptions
from awa_django.ops import audit
from awa_django.producer.enqueue import enqueue_at_lane_priority
from awa_django.sql import queries
from awa_django.storage.browse import JobFilter, count_in_state
from awa_django.storage.connections import connect, connection_kwargs
from awa_django.storage.control import drain_candidates
from awa_django.storage.execution import close_params
from awa_django.storage.queue import ClaimRequest, claim_ready
from awa_django.storage.statement import Statement, run, run_async, run_read
from tests.commit_statements import statements_at_commit
from tests.conftest import wait_until
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


def claim_statement(
    queue: str = "default", limit: int = 100, *, aging_s: float = 0, sequential: bool = False
) -> Statement[list[ClaimedJob]]:
    request = ClaimRequest(
        queue=queue, claimed_by="test", deadline_s=0, aging_s=aging_s, sequential=sequential
    )
    return claim_ready(request, rows=claimed_job_rows, limit=limit, aged=aging_s > 0)


def claim(
    queue: str = "default", limit: int = 100, *, aging_s: float = 0, sequential: bool = False
) -> list[ClaimedJob]:
    statement = claim_statement(queue, limit, aging_s=aging_s, sequential=sequential)

    async def main() -> list[ClaimedJob]:
        async with await connect("default") as conn:
            return await run_async(conn, statement)

    return asyncio.run(main())


def claimed_ids(queue: str = "default") -> list[int]:
    return [job.job_id for job in claim(queue)]


def sleeping_in_commit(backend_pid: int) -> None:
    """Wait until the backend sleeps in a trigger of the test's own that awa's publication
    fires before (``at_commit``'s, or a row trigger on awa.lane_commits): it has drawn its
    commit position, and holds the lane's producer lock until it commits."""
    with psycopg.connect(**connection_kwargs("default"), autocommit=True) as watcher:
        wait_until(
            lambda: watcher.execute(
                "SELECT wait_event IS NOT DISTINCT FROM 'PgSleep' FROM pg_stat_activity"
                " WHERE pid = %s",
                [backend_pid],
            ).fetchone()[0],
            timeout=10,
            interval=0.005,
        )


class EarlyClaim:
    """A claim whose transaction starts when this is made, before the commits the test makes
    next. awa.claim_ready steps over a missing position once the commit after it was drawn
    250 ms before the claim's now(), its transaction's start: this claim's now() precedes
    those commits, so it comes within that bound however long the machine takes to run it."""

    def __init__(self) -> None:
        self.conn = psycopg.connect(**connection_kwargs("default"))
        self.conn.execute("SELECT now()")  # the transaction has started: its now() is set

    def claimed_ids(self, queue: str = "default") -> list[int]:
        """The jobs it claims (each statement sees what committed before it), then commits."""
        statement = claim_statement(queue)
        try:
            with self.conn.cursor(row_factory=dict_row) as cursor:
                cursor.execute(statement.sql, statement.params)
                claimed = [row["job_id"] for row in cursor.fetchall()]
            self.conn.commit()
        finally:
            self.conn.close()
        return claimed


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

    # The lanes exist before the producers start, as after any earlier enqueue.
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
    """Create the lane and drain it."""
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
    sleeping_in_commit(slow.backend_pid)
    early = EarlyClaim()
    later = noop.enqueue(n=2)
    assert early.claimed_ids() == []
    first = slow.finish()
    assert slow.error is None and slow.committed_in >= 1.0
    assert claimed_ids() == [first, later]


def fail_a_position(at_commit: Callable[[str], None]) -> tuple[int | None, int]:
    """A producer that fails at commit after drawing its position (the lane's next), then a
    job committed after it: the failed job's id and the later one's."""

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
    return failed.result, later


def test_a_position_whose_producer_failed_at_commit_is_stepped_over(at_commit):
    used_lane()
    failed, later = fail_a_position(at_commit)
    assert awa.get_job(failed) is None
    assert claimed_ids() == [later]


def test_a_dead_position_right_after_a_commit_with_rows_left_is_stepped_over_in_one_claim(
    at_commit,
):
    # A claim reads its lane's cursor in the statement that claims, which takes the lane only
    # when its next commit follows the cursor (migration 0040). Here it does not: the claim
    # falls back to the cursor it read, settles the dead position and takes the rest of the
    # cursor's commit and the commit past it, as one claim, in order.
    first, second = awa.enqueue_many(noop, [{"n": 1}, {"n": 2}])
    assert [job.job_id for job in claim(limit=1)] == [first]
    _, later = fail_a_position(at_commit)
    assert claimed_ids() == [second, later]


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


# How long a claim waits for a missing position whose producer is still in flight before it
# takes the lane past it (awa.claim_ready), and a margin for this machine's clock and load.
HOLE_BOUND_S = 0.25
PAST_THE_BOUND_S = HOLE_BOUND_S + 0.15


def held_open(*, jobs: int = 1, rollback: bool = False, priority: int | None = None) -> Producer:
    """A transaction that enqueues, publishes early as Django's ``check_constraints()`` does
    (``SET CONSTRAINTS ALL IMMEDIATE``: loaddata, TestCase), and stays open."""

    def body() -> list[int]:
        job_ids = [put(n, priority=priority) for n in range(jobs)]
        connection.check_constraints()
        return job_ids

    producer = Producer(body, rollback=rollback)
    producer.start()
    assert producer.ready.wait(10) and producer.error is None
    return producer


def available_count() -> int:
    with connection.cursor() as cursor:
        return run_read(cursor, count_in_state("available", JobFilter()))


def view_count(state: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.jobs WHERE state = %s", [state])
        return int(cursor.fetchone()[0])


def holes(queue: str = "default") -> list[tuple[int, int]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT first_seq, last_seq FROM awa.lane_holes WHERE queue = %s ORDER BY 1", [queue]
        )
        return [(row[0], row[1]) for row in cursor.fetchall()]


def test_a_transaction_that_published_early_and_stays_open_holds_its_lane_only_for_the_bound():
    used_lane()  # position 1
    held = held_open(jobs=3)  # position 2, held for as long as the transaction is open
    later = [put(10), put(11)]  # positions 3 and 4
    # Within the bound the position is a commit in flight, whose jobs come first.
    assert claimed_ids() == []
    time.sleep(PAST_THE_BOUND_S)
    assert claimed_ids() == later
    assert holes() == [(2, 2)]
    assert audit.run().held  # the open position is a recorded hole, not a stuck one
    after = put(12)  # a commit after the hole is taken in order, without waiting
    assert claimed_ids() == [after]
    assert claimed_ids() == []
    first = held.finish()
    assert held.error is None
    # The late commit's rows, behind the lane's claim cursor, are available, and counted so
    # although the count reads what waits after each cursor.
    assert available_count() == len(first) == view_count("available")
    # So are queue health's depth and the drain's count, which read the same rows.
    assert {d.queue: d.available for d in awa.queues.stats()}["default"] == len(first)
    with connection.cursor() as cursor:
        assert run(cursor, drain_candidates(queue="default")) == len(first)
    # The late commit is claimed, ahead of what came after it, across as many claims as its
    # rows need, and each row once.
    then = put(13)
    assert [job.job_id for job in claim(limit=2)] == first[:2]
    assert holes() == [(2, 2)]
    assert claimed_ids() == [first[2], then]
    assert holes() == []
    assert claimed_ids() == []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), count(DISTINCT job_id) FROM awa.claim_receipts"
            " WHERE job_id = ANY(%s)",
            [[*first, *later, after, then]],
        )
        assert cursor.fetchone() == (7, 7)
    assert audit.run().held


def test_a_transaction_that_published_early_and_rolls_back_is_never_claimed():
    used_lane()
    doomed = held_open(jobs=2, rollback=True)
    later = put(10)
    time.sleep(PAST_THE_BOUND_S)
    assert claimed_ids() == [later]
    assert holes() == [(2, 2)]
    job_ids = doomed.finish()
    assert doomed.error is None
    # No producer of the lane is in flight any more: the missing position is dead and its
    # record goes with the next claim.
    assert claimed_ids() == []
    assert holes() == []
    assert awa.get_jobs(job_ids) == []
    next_one = put(11)
    assert claimed_ids() == [next_one]


def test_a_hole_is_closed_once_every_transaction_in_flight_when_it_was_recorded_has_ended():
    # A busy lane may never be free of producers in flight, so the lane's lock cannot tell the
    # claim that a missing position is dead; the transactions that were in progress when the
    # hole was recorded having all ended can.
    used_lane()
    doomed = held_open(rollback=True)  # position 2
    later = put(10)  # position 3
    time.sleep(PAST_THE_BOUND_S)
    assert claimed_ids() == [later]
    assert holes() == [(2, 2)]
    doomed.finish()
    busy = held_open()  # position 4: a producer of the lane in flight from now on
    assert claimed_ids() == []
    assert holes() == []
    first = busy.finish()
    assert claimed_ids() == first


def test_a_commit_in_flight_for_less_than_the_bound_is_still_waited_for(at_commit):
    used_lane()

    def enqueue_then_commit_slowly() -> int:
        job_id = noop.enqueue(n=1)
        at_commit("sleep 2")  # runs after awa has published, inside the commit
        return job_id

    slow = Producer(enqueue_then_commit_slowly)
    slow.start()
    assert slow.ready.wait(10)
    slow.release.set()
    sleeping_in_commit(slow.backend_pid)
    # The producer has its position and commits for 2 s; each claim below comes within the
    # bound of the later commit, so the lane keeps its order.
    early, second = EarlyClaim(), EarlyClaim()
    later = noop.enqueue(n=2)
    assert early.claimed_ids() == []
    assert second.claimed_ids() == []
    first = slow.finish()
    assert claimed_ids() == [first, later]
    assert holes() == []


def test_a_late_commit_alone_in_its_lane_is_found_by_an_aged_claim_order():
    # With aging, a claim visits only the lanes with a head (awa.lane_head): the late commit's
    # lane must have one.
    put(0, priority=1)
    assert len(claim()) == 1
    used_lane()
    held = held_open()
    later = put(10)
    time.sleep(PAST_THE_BOUND_S)
    assert [job.job_id for job in claim(aging_s=60)] == [later]
    assert claim(aging_s=60) == []
    first = held.finish()
    assert [job.job_id for job in claim(aging_s=60)] == first
    assert holes() == []


def test_a_late_commit_in_a_lane_a_lane_mark_left_out_is_claimed():
    # Past 4 lanes per shard a claim visits the lanes of the queue's newest lane mark, which
    # leaves out a lane it found with nothing to claim, as this one is while its late commit
    # is still open; the commit, which that mark did not see, brings the lane back.
    for priority in range(1, 7):
        enqueue_at_lane_priority(
            noop,
            args={"n": priority},
            options=EnqueueOptions(queue="default", priority=priority, eager=False),
        )
    assert len(claim()) == 6
    held = held_open()
    later = put(10)
    time.sleep(PAST_THE_BOUND_S)
    assert claimed_ids() == [later]
    assert claimed_ids() == []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT lanes FROM awa.lane_marks WHERE queue = 'default' ORDER BY mark DESC LIMIT 1"
        )
        assert cursor.fetchone() == ([],)
    first = held.finish()
    assert claimed_ids() == first
    assert holes() == []


def test_a_late_job_of_a_sequential_lane_waits_for_the_running_one_and_holds_the_next():
    put(0)
    (warm,) = claim(sequential=True)
    close(warm)
    held = held_open()
    later = [put(10), put(11)]
    time.sleep(PAST_THE_BOUND_S)
    (running,) = claim(sequential=True)
    assert running.job_id == later[0]
    first = held.finish()
    # One job of the lane at a time: the late one after the running one ends, and the next
    # after the late one ends.
    assert claim(sequential=True) == []
    close(running)
    (late,) = claim(sequential=True)
    assert late.job_id == first[0]
    assert claim(sequential=True) == []
    close(late)
    assert [job.job_id for job in claim(sequential=True)] == [later[1]]
    assert holes() == []


def close(job: ClaimedJob) -> None:
    completion = Completion(
        job_id=job.job_id,
        run_lease=job.run_lease,
        queue=job.queue,
        priority=job.priority,
        shard=job.shard,
        lane_seq=job.lane_seq,
        ready_slot=job.ready_slot,
        outcome=Outcome.COMPLETED,
    )
    with connection.cursor() as cursor:
        cursor.execute(queries("execution")["close_attempts"], close_params([completion]))
        assert len(cursor.fetchall()) == 1


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


def test_a_commit_publishes_every_lane_in_one_statement():
    """The commit-time trigger's work for a lane (lane lock, position, lane_commits row, wake
    lock test, the record in awa.published) is one top-level statement (migration 0026; it was
    three), and a later row of a lane already published none; the first firing publishes every
    lane the transaction enqueued into in that one statement (migration 0035; one per lane
    before it); a NOTIFY, while a worker waits, is the one more."""
    used_lane()
    used_lane("email")
    ids: list[int] = []
    one = statements_at_commit(lambda: ids.append(put(1)))
    assert len(one) == 1, one
    assert one[0].startswith("INSERT INTO awa.lane_commits"), one
    three = statements_at_commit(lambda: ids.extend(put(n) for n in range(3)))
    assert len(three) == 1, three
    two_lanes = statements_at_commit(lambda: ids.extend([put(1), put(2, "email"), put(3)]))
    assert len(two_lanes) == 1, two_lanes
    waiter = psycopg.connect(**connection_kwargs("default"), autocommit=True)
    try:
        waiter.execute("SELECT pg_advisory_lock(1096237385, hashtext('default'))")
        notified = statements_at_commit(lambda: ids.append(put(4)))
    finally:
        waiter.close()
    assert len(notified) == 2 and "pg_notify" in notified[1], notified
    assert claimed_ids() == [ids[0], *ids[1:4], ids[4], ids[6], ids[7]]
    assert claimed_ids("email") == [ids[5]]


def test_lanes_written_other_ways_are_published_whole_beside_those_listed():
    """The first firing publishes the lanes awa.enqueue_job listed from its own row's lane_seq
    on: rows of a listed lane written before its listed enqueue (a COPY of enqueue_many) are
    in that range, so none is left out when a later row's firing finds the lane published."""
    used_lane()
    used_lane("email")
    with transaction.atomic():
        first = put(1, "email")
        batch = noop.enqueue_many([{"n": i} for i in range(2, 5)])
        last = put(5)
        later = put(6, "email")
    assert claimed_ids() == [*batch, last]
    assert claimed_ids("email") == [first, later]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT queue, count(*) FROM awa.lane_commits WHERE batch = "
            "(SELECT batch FROM awa.ready_entries WHERE job_id = %s) GROUP BY queue ORDER BY 1",
            [last],
        )
        assert cursor.fetchall() == [("default", 1), ("email", 1)]


def test_a_savepoint_rolled_back_takes_its_lanes_off_the_list_to_publish():
    used_lane()
    used_lane("email")
    with transaction.atomic():
        kept = put(1)
        try:
            with transaction.atomic():
                put(2, "email")
                with connection.cursor() as cursor:
                    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
                    cursor.execute("SET CONSTRAINTS ALL DEFERRED")
                raise RuntimeError
        except RuntimeError:
            pass
        again = put(3, "email")
    assert claimed_ids() == [kept]
    assert claimed_ids("email") == [again]


def test_the_lanes_to_publish_are_one_setting_the_first_firing_reads_and_clears():
    """Migration 0037: the list is one setting, awa.lanes, each lane's JSON key after a comma
    (four settings before it), listed once per lane, read as a JSON array by the publication
    and emptied by it; a savepoint rolled back restores what was listed before it."""
    used_lane()
    used_lane("email")

    def listed(cursor: Any) -> list[list[Any]]:
        cursor.execute("SELECT coalesce(current_setting('awa.lanes', true), '')")
        text = cursor.fetchone()[0]
        return json.loads("[" + text[1:] + "]") if text else []

    with transaction.atomic(), connection.cursor() as cursor:
        first, _, _ = put(1), put(2, "email"), put(3)
        cursor.execute("SELECT priority FROM awa.ready_entries WHERE job_id = %s", [first])
        priority = cursor.fetchone()[0]
        assert listed(cursor) == [["default", priority, 0], ["email", priority, 0]]
        try:
            with transaction.atomic():
                put(4, "partners")
                assert [lane[0] for lane in listed(cursor)] == ["default", "email", "partners"]
                raise RuntimeError
        except RuntimeError:
            pass
        assert [lane[0] for lane in listed(cursor)] == ["default", "email"]
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        assert listed(cursor) == []
    assert len(claimed_ids()) == 2 and len(claimed_ids("email")) == 1


def test_queue_names_the_list_of_lanes_must_quote_are_published_as_written():
    """The list of lanes to publish holds queue names as JSON strings: a name with the
    characters JSON escapes (and array text quoted, before 0037) comes back whole."""
    odd = 'odd, "quoted" {braced} \\ name'
    with transaction.atomic(), connection.cursor() as cursor:
        for queue in (odd, "default", odd):
            cursor.execute(
                "SELECT awa.enqueue_job('raw.kind', %s, 2::smallint, '{}', 3, NULL, '{}', '{}')",
                [queue],
            )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT queue, last_seq - first_seq FROM awa.lane_commits"
            " WHERE queue IN (%s, 'default') ORDER BY queue",
            [odd],
        )
        assert cursor.fetchall() == [("default", 2), (odd, 2)]


def test_a_queue_name_with_the_records_separators_is_published_once_per_range():
    """awa.published keys a lane by its JSON key (migration 0037), whose queue name may hold
    the record's own separators (';', '='): the later firings of rows already published still
    find their lane's entry, and rows written after an early publication get a range of their
    own."""
    odd = 'semi;colon=equals "and" quotes'

    def raw(cursor: Any) -> None:
        cursor.execute(
            "SELECT awa.enqueue_job('raw.kind', %s, 2::smallint, '{}', 3, NULL, '{}', '{}')",
            [odd],
        )

    with transaction.atomic(), connection.cursor() as cursor:
        raw(cursor)
        raw(cursor)
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")
        raw(cursor)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT last_seq - first_seq FROM awa.lane_commits WHERE queue = %s"
            " ORDER BY commit_seq",
            [odd],
        )
        assert cursor.fetchall() == [(1,), (0,)]


def test_a_bulk_enqueue_after_a_single_one_is_published_in_the_same_statement():
    """A COPY's reservation lists its lane as awa.enqueue_job does (migration 0036), so a
    transaction that enqueues one job and then a batch into another lane publishes both lanes
    in the one statement at commit (before it, the batch's lane took a second one)."""
    used_lane()
    used_lane("email")
    ids: list[int] = []

    def single_then_bulk() -> None:
        ids.append(put(1))
        ids.extend(noop.using(queue="email").enqueue_many([{"n": n} for n in range(2, 5)]))
        ids.append(put(5))

    statements = statements_at_commit(single_then_bulk)
    assert len(statements) == 1, statements
    assert claimed_ids() == [ids[0], ids[4]]
    assert claimed_ids("email") == ids[1:4]
