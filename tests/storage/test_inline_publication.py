"""An enqueue that is its own transaction publishes its job in its own statement (#32,
docs/architecture.md#publication-in-the-enqueue-statement): one statement, no commit trigger,
and the lane keeps its order and loses nothing when such producers mix with transactional ones,
on real concurrent connections."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta

import psycopg
import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

import awa_django as awa
from awa_django.sql import queries
from awa_django.storage.connections import connection_kwargs
from tests.jobs import noop
from tests.storage.test_commit_publication import (
    EarlyClaim,
    claim,
    claimed_ids,
    sleeping_in_commit,
)

pytestmark = pytest.mark.usefixtures("awa_db")

ALONE = (
    "SELECT awa.enqueue_job_alone('tests.noop', %s, 2::smallint, %s::jsonb, 25, NULL, '{}',"
    " '{}') AS job_id"
)
DEFERRED = (
    "SELECT awa.enqueue_job('tests.noop', %s, 2::smallint, %s::jsonb, 25, NULL, '{}', '{}')"
    " AS job_id"
)


def sql_enqueue(conn: psycopg.Connection, statement: str, n: int, queue: str = "default") -> int:
    row = conn.execute(statement, [queue, f'{{"n": {n}}}']).fetchone()
    assert row is not None
    return int(row[0])


def sent(queries: CaptureQueriesContext) -> list[str]:
    """Each captured statement, without its comment lines, up to its first parenthesis."""
    return [
        " ".join(line for line in q["sql"].splitlines() if not line.startswith("--")).split("(")[0]
        for q in queries.captured_queries
    ]


def lane_commits(queue: str = "default") -> list[tuple[int, int, int]]:
    """``(commit_seq, first_seq, last_seq)`` of every commit of the queue's lanes."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT commit_seq, first_seq, last_seq FROM awa.lane_commits WHERE queue = %s"
            " ORDER BY commit_seq",
            [queue],
        )
        return [tuple(row) for row in cursor.fetchall()]


@pytest.fixture
def own_connection() -> Iterator[Callable[..., psycopg.Connection]]:
    opened: list[psycopg.Connection] = []

    def open_one(*, autocommit: bool = True) -> psycopg.Connection:
        conn = psycopg.connect(**connection_kwargs("default"), autocommit=autocommit)
        opened.append(conn)
        return conn

    yield open_one
    for conn in opened:
        conn.close()


def test_an_autocommit_enqueue_sends_one_statement_and_queues_no_commit_trigger():
    noop.enqueue(n=0)  # the lane exists, as after any earlier enqueue
    assert len(claim()) == 1
    with CaptureQueriesContext(connection) as queries:
        job_id = noop.enqueue(n=1)
    assert sent(queries) == ["SELECT awa.enqueue_job_alone"]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT announce, lane_seq, batch::text FROM awa.ready_entries WHERE job_id = %s",
            [job_id],
        )
        announce, lane_seq, batch = cursor.fetchone()
        # Not announcing is what keeps the deferred trigger from being queued at all (its WHEN).
        assert announce is False
        cursor.execute(
            "SELECT batch::text FROM awa.lane_commits WHERE queue = 'default'"
            " AND %s BETWEEN first_seq AND last_seq",
            [lane_seq],
        )
        assert cursor.fetchall() == [(batch,)]
    assert lane_commits()[-1][1:] == (lane_seq, lane_seq)
    assert claimed_ids() == [job_id]


def test_the_statement_itself_publishes_and_leaves_the_commit_nothing_to_do(own_connection):
    noop.enqueue(n=0)
    assert len(claim()) == 1
    conn = own_connection(autocommit=False)
    job_id = sql_enqueue(conn, ALONE, 1)
    # Published before the commit, by the statement; firing every pending deferred trigger now
    # (what the commit would do) adds no commit.
    assert conn.execute("SELECT count(*) FROM awa.lane_commits").fetchone() == (2,)
    conn.execute("SET CONSTRAINTS ALL IMMEDIATE")
    assert conn.execute("SELECT count(*) FROM awa.lane_commits").fetchone() == (2,)
    conn.commit()
    assert claimed_ids() == [job_id]


def test_an_enqueue_inside_atomic_still_publishes_at_commit():
    noop.enqueue(n=0)
    assert len(claim()) == 1
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        first = noop.enqueue(n=1)
        second = noop.enqueue(n=2)
    statements = sent(queries)
    assert statements.count("SELECT awa.enqueue_job") == 2
    assert "SELECT awa.enqueue_job_alone" not in statements
    assert len(lane_commits()) == 2  # the lane's first job, then one commit for both
    assert claimed_ids() == [first, second]


def test_a_scheduled_autocommit_enqueue_waits_in_the_backlog():
    job_id = awa.enqueue(noop, args={"n": 1}, run_at=timedelta(hours=1))
    assert awa.get_job(job_id).state == "scheduled"
    assert lane_commits() == []


def test_called_after_the_transaction_wrote_it_leaves_publication_to_the_commit(own_connection):
    """A raw BEGIN on an autocommit connection: the transaction's earlier row of the lane is
    still to be published, so the call goes the deferred way and each row gets one commit."""
    noop.enqueue(n=0)
    assert len(claim()) == 1
    conn = own_connection(autocommit=False)
    first = sql_enqueue(conn, DEFERRED, 1)
    second = sql_enqueue(conn, ALONE, 2)
    assert conn.execute("SELECT count(*) FROM awa.lane_commits").fetchone() == (1,)
    conn.commit()
    assert len(lane_commits()) == 2
    assert claimed_ids() == [first, second]


def test_called_after_the_transaction_reserved_positions_it_leaves_publication_to_the_commit(
    own_connection,
):
    """A COPY's reservation draws lane_seqs below the call's and writes nothing (nextval takes a
    transaction id only now and then, when it logs the sequence); the rows written with them
    are published from their first lane_seq at commit, which would put a job the call published
    apart in two commits. So the call goes the deferred way, as awa.enqueue_job would."""
    noop.enqueue(n=0)
    assert len(claim()) == 1
    conn = own_connection(autocommit=False)
    conn.execute(
        queries("queue")["reserve_ready_batch"],
        {"queue": "default", "priority": 2, "count": 2, "ordering_key": None},
    )
    job_id = sql_enqueue(conn, ALONE, 1)
    assert conn.execute(
        "SELECT announce FROM awa.ready_entries WHERE job_id = %s", [job_id]
    ).fetchone() == (True,)
    assert conn.execute("SELECT count(*) FROM awa.lane_commits").fetchone() == (1,)
    conn.commit()
    assert claimed_ids() == [job_id]


def test_rows_written_after_it_in_the_same_transaction_get_a_position_of_their_own(
    own_connection,
):
    """The transaction goes on after the call: an early publication, so later rows are
    published at its commit, each once, after the job."""
    noop.enqueue(n=0)
    assert len(claim()) == 1
    conn = own_connection(autocommit=False)
    first = sql_enqueue(conn, ALONE, 1)
    later = [sql_enqueue(conn, DEFERRED, 2), sql_enqueue(conn, ALONE, 3)]
    conn.commit()
    commits = lane_commits()
    assert len(commits) == 3
    assert commits[1][1] == commits[1][2]  # the first job alone
    assert claimed_ids() == [first, *later]
    assert claimed_ids() == []


# Holds an enqueue that publishes in its statement between its position and its commit: a
# row trigger of the test's own on lane_commits, for a session that set tests.slow_publish.
SLOW_PUBLISH_DDL = """
CREATE OR REPLACE FUNCTION tests_slow_publish() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('tests.slow_publish', true) = 'on' THEN
        PERFORM pg_sleep(1);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER tests_slow_publish AFTER INSERT ON awa.lane_commits
    FOR EACH ROW EXECUTE FUNCTION tests_slow_publish();
"""


@pytest.fixture
def slow_publish() -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute(SLOW_PUBLISH_DDL)
    yield
    with connection.cursor() as cursor:
        cursor.execute(
            "DROP TRIGGER tests_slow_publish ON awa.lane_commits;"
            " DROP FUNCTION tests_slow_publish()"
        )


def test_a_lane_is_never_claimed_past_an_autocommit_producer_still_in_its_statement(
    slow_publish, own_connection
):
    """The position is covered by the lane's producer lock until the commit: a claim that finds
    it missing waits for it rather than stepping over it (and losing the job)."""
    awa.enqueue(noop, args={"n": 0}, queue="partners")  # the lane exists
    assert len(claim("partners")) == 1
    held: list[int] = []
    slow = own_connection()
    slow.execute("SET tests.slow_publish = on")
    producer = threading.Thread(target=lambda: held.append(sql_enqueue(slow, ALONE, 1, "partners")))
    producer.start()
    sleeping_in_commit(slow.info.backend_pid)
    # Within the 250 ms a claim waits for a younger gap: a claim that could have the lane's
    # producer lock would step over the position at once.
    early = EarlyClaim()
    later = sql_enqueue(own_connection(), DEFERRED, 2, "partners")
    assert early.claimed_ids("partners") == []
    producer.join(10)
    assert claimed_ids("partners") == [*held, later]


@dataclass
class Produced:
    job_ids: list[int]
    started: float
    committed: float


def test_autocommit_and_transactional_producers_mixed_on_one_lane_keep_commit_order(
    own_connection,
):
    """Several autocommit producers and transactional ones (several jobs, then a pause before
    the commit) on one lane while a claimer claims: every job is claimed once, and a job whose
    commit returned before another's enqueue began is claimed first."""
    noop.enqueue(n=0)
    assert len(claim()) == 1
    produced: list[Produced] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    producing = 7

    def autocommit_producer(seed: int) -> None:
        conn = own_connection()
        try:
            for i in range(60):
                started = time.monotonic()
                job_id = sql_enqueue(conn, ALONE, seed * 1000 + i)
                with lock:
                    produced.append(Produced([job_id], started, time.monotonic()))
        except BaseException as error:
            errors.append(error)

    def transactional_producer(seed: int) -> None:
        conn = own_connection(autocommit=False)
        try:
            for i in range(25):
                started = time.monotonic()
                ids = [sql_enqueue(conn, DEFERRED, seed * 1000 + i * 10 + k) for k in range(3)]
                conn.execute("SELECT pg_sleep(0.001)")
                conn.commit()
                with lock:
                    produced.append(Produced(ids, started, time.monotonic()))
        except BaseException as error:
            errors.append(error)

    claimed: list[int] = []

    def claimer() -> None:
        try:
            while True:
                done = producing == 0
                got = [job.job_id for job in claim(limit=7)]
                claimed.extend(got)
                if done and not got:
                    return
        except BaseException as error:
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=autocommit_producer, args=(s,)) for s in range(4)] + [
        threading.Thread(target=transactional_producer, args=(s,)) for s in range(4, 7)
    ]
    claiming = threading.Thread(target=claimer)
    claiming.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
        producing -= 1
    claiming.join(60)
    assert errors == []
    everything = [job_id for p in produced for job_id in p.job_ids]
    assert len(everything) == 4 * 60 + 3 * 25 * 3
    assert sorted(claimed) == sorted(everything)  # each once, none lost
    place = {job_id: index for index, job_id in enumerate(claimed)}
    for earlier in produced:
        for later in produced:
            if earlier.committed < later.started:
                assert max(place[j] for j in earlier.job_ids) < min(place[j] for j in later.job_ids)
    for p in produced:
        # A transaction's jobs stay together, in their order.
        positions = [place[j] for j in p.job_ids]
        assert positions == sorted(positions)


TRICKY_TAGS = ["a,b", 'say "hi"', "back\\slash", "{brace}", "NULL", " spaced ", "é中"]


@pytest.mark.parametrize(
    "enqueue",
    [
        lambda: awa.enqueue(noop, args={"n": 1}, tags=TRICKY_TAGS),
        lambda: awa.enqueue(noop, args={"n": 1}, tags=TRICKY_TAGS, run_at=timedelta(hours=1)),
        lambda: noop.using(tags=TRICKY_TAGS).enqueue_many([{"n": 1}])[0],
    ],
    ids=["single", "scheduled", "bulk"],
)
def test_tags_are_stored_as_given(enqueue: Callable[[], int]):
    """A single enqueue sends its tags as a text[] literal it builds itself."""
    assert awa.get_job(enqueue()).tags == TRICKY_TAGS
