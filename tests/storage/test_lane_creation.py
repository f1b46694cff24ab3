"""Lanes are created outside producers' transactions (docs/architecture.md, "Lanes are created
outside producers' transactions"): a producer's first job of a queue and priority has its lanes
created on a connection of their own, once per process; a lane created at a commit (raw SQL)
makes only first users of that same lane wait; a new shard count creates its lanes. Run through
PgBouncer in transaction mode too (tests/deployment/test_pgbouncer.py): every statement here
keeps to its transaction."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest
from django.db import transaction

import awa_django as awa
from awa_django.declarations.workflow_steps import Call
from awa_django.ops.shards import set_enqueue_shards
from awa_django.storage import lanes
from awa_django.storage.connections import connection_kwargs
from awa_django.testing import reset_queue
from tests.jobs import noop

pytestmark = pytest.mark.usefixtures("awa_db")


def autocommit() -> psycopg.Connection:
    return psycopg.connect(**connection_kwargs("default"), autocommit=True)


def lanes_of(queue: str) -> list[tuple[int, int]]:
    """The (priority, shard) lanes of ``queue`` that exist, as another connection sees them."""
    with autocommit() as conn:
        rows = conn.execute(
            "SELECT l.priority, l.shard FROM awa.queue_lanes l WHERE l.queue = %s"
            " AND to_regclass('awa.' || awa.lane_sequence_name(l.queue, l.priority, l.shard))"
            " IS NOT NULL ORDER BY 1, 2",
            [queue],
        ).fetchall()
    return [(priority, shard) for priority, shard in rows]


def claimed(queue: str) -> list[int]:
    with autocommit() as conn:
        rows = conn.execute(
            "SELECT job_id FROM awa.claim_ready(%s, 100, 'test', 0, 0, false)", [queue]
        ).fetchall()
    return sorted(job_id for (job_id,) in rows)


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The connections ``storage.lanes`` opens (each still opened for real)."""
    opened: list[str] = []
    real = psycopg.connect

    def counting(*args: object, **kwargs: object) -> psycopg.Connection:
        if kwargs.get("application_name") == "awa_lanes":
            opened.append(str(kwargs.get("application_name")))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(lanes.psycopg, "connect", counting)
    yield opened


def test_an_enqueue_creates_its_lanes_before_its_transaction_on_every_shard():
    set_enqueue_shards("email", 3)
    with transaction.atomic():
        job_id = awa.enqueue(noop, args={"n": 1}, queue="email", priority=2)
        # Committed already, by a transaction of their own: visible to everyone.
        assert lanes_of("email") == [(2, 0), (2, 1), (2, 2)]
        transaction.set_rollback(True)
    assert awa.get_job(job_id) is None
    assert lanes_of("email") == [(2, 0), (2, 1), (2, 2)]
    assert claimed("email") == []
    later = awa.enqueue(noop, args={"n": 2}, queue="email", priority=2)
    assert claimed("email") == [later]


def test_known_lanes_cost_no_statement_and_a_reset_forgets_them(connects):
    awa.enqueue(noop, args={"n": 1}, queue="email")
    assert connects == ["awa_lanes"]
    awa.enqueue(noop, args={"n": 2}, queue="email")
    awa.enqueue_many(noop, [{"n": 3}, {"n": 4}], queue="email")
    assert connects == ["awa_lanes"]
    # A future job enters its lane when the leader promotes it, not in this transaction.
    awa.enqueue(noop, args={"n": 5}, queue="email", priority=4, run_at=timedelta(hours=1))
    assert connects == ["awa_lanes"]
    awa.enqueue_many(noop, [{"n": 6}], queue="email", priority=3)
    assert connects == ["awa_lanes", "awa_lanes"]

    reset_queue()  # drops every lane
    with transaction.atomic():
        awa.enqueue(noop, args={"n": 7}, queue="email")
        assert lanes_of("email") == [(2, 0)]
    assert len(connects) == 3


def test_a_workflow_creates_every_steps_lanes_before_its_transaction():
    flow = awa.chain(
        awa.call(noop, n=1),
        Call(noop, {"n": 2}, awa.EnqueueOptions(queue="email", priority=3)),
    )
    with transaction.atomic():
        flow.enqueue()
        assert lanes_of("default") == [(2, 0)] and lanes_of("email") == [(3, 0)]


def test_a_new_shard_count_creates_its_lanes_at_every_priority_used():
    awa.enqueue(noop, args={"n": 1}, queue="email", priority=1)
    awa.enqueue(noop, args={"n": 2}, queue="email", priority=3)
    set_enqueue_shards("email", 3)
    assert lanes_of("email") == [(1, 0), (1, 1), (1, 2), (3, 0), (3, 1), (3, 2)]


RAW_ENQUEUE = (
    "SELECT awa.enqueue_job('k.raw', %s, 2::smallint, '{}'::jsonb, 3, NULL, '{}'::jsonb,"
    " '{}'::text[])"
)


def test_a_lane_created_by_a_held_commit_makes_only_that_lanes_first_users_wait():
    """A raw-SQL producer creates its lane when it publishes; published early and held open,
    it keeps that lane's creation to itself, and nothing else."""
    with autocommit() as held, autocommit() as other:
        held.execute("BEGIN")
        (held_job,) = held.execute(RAW_ENQUEUE, ["raw_held"]).fetchone()
        held.execute("SET CONSTRAINTS ALL IMMEDIATE")  # creates the lane and publishes

        started = time.monotonic()
        with other.transaction():  # another lane's creation, at its commit
            other.execute("SET LOCAL lock_timeout = '3s'")
            (raw_job,) = other.execute(RAW_ENQUEUE, ["raw_other"]).fetchone()
        awa_job = awa.enqueue(noop, args={"n": 1}, queue="email")  # and through the API
        assert time.monotonic() - started < 2.0
        assert claimed("raw_other") == [raw_job]
        assert claimed("email") == [awa_job]

        # A first use of the held lane itself waits: its sequence is not committed yet.
        with pytest.raises(psycopg.errors.LockNotAvailable), other.transaction():
            other.execute("SET LOCAL lock_timeout = '300ms'")
            other.execute(RAW_ENQUEUE, ["raw_held"])
            other.execute("SET CONSTRAINTS ALL IMMEDIATE")
        held.execute("COMMIT")
    assert claimed("raw_held") == [held_job]


@pytest.mark.parametrize("first_ends", ["commit", "rollback"])
def test_two_first_uses_of_one_lane_at_once_both_publish(first_ends: str):
    """The second creator waits for the first, then finds its sequence (it committed) or
    creates the lane itself (it rolled back)."""
    with autocommit() as first, autocommit() as second:
        first.execute("BEGIN")
        (first_job,) = first.execute(RAW_ENQUEUE, ["raw_twice"]).fetchone()
        first.execute("SET CONSTRAINTS ALL IMMEDIATE")
        second.execute("BEGIN")
        (second_job,) = second.execute(RAW_ENQUEUE, ["raw_twice"]).fetchone()
        done = threading.Event()
        errors: list[BaseException] = []

        def commit_second() -> None:
            try:
                second.execute("COMMIT")
            except BaseException as error:
                errors.append(error)
            finally:
                done.set()

        waiter = threading.Thread(target=commit_second)
        waiter.start()
        assert not done.wait(0.5)  # waits for the first creator
        first.execute(first_ends.upper())
        waiter.join(10)
        assert done.is_set() and errors == []
    expected = [first_job, second_job] if first_ends == "commit" else [second_job]
    assert claimed("raw_twice") == expected
    assert lanes_of("raw_twice") == [(2, 0)]
