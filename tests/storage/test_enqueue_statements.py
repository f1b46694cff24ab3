"""What a single enqueue costs (#32). On the server, nested statements included: each statement
a PL/pgSQL function runs is an executor run of its own, paid by every enqueue. Since migration
0031 the ring slot is read and pinned in one statement (``awa.producer_slot``), and an
autocommit enqueue publishes its job in one ``INSERT`` that also takes the lane lock and tries
the wake lock (``awa.enqueue_job_alone``); since 0037 that ``INSERT`` also reads the ring's slot
and writes the ready row, in one statement. In the client: an autocommit enqueue, committed when
its statement returns, counts and announces its job at once, without registering commit
callbacks; the enqueue uses no Django cursor at all (``run_on``), and ``run`` reads a statement's
rows past Django's per-call error wrapper."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.db.backends.utils import CursorWrapper

import awa_django as awa
from awa_django.signals import job_enqueued
from awa_django.storage.statement import Statement, first_int, run
from tests.commit_statements import statements_run
from tests.jobs import noop

pytestmark = pytest.mark.usefixtures("awa_db")


def kinds(statements: list[str]) -> list[str]:
    """Each statement as its first words: enough to tell them apart."""
    return [" ".join(s.split()[:3]) for s in statements]


def test_an_autocommit_enqueue_runs_its_call_and_two_statements_inside_it():
    awa.enqueue(noop, args={"n": 0})  # the lane exists: no statement of its creation below
    ran = statements_run(lambda: awa.enqueue(noop, args={"n": 1}))
    assert len(ran) == 3, ran
    assert "SELECT awa.enqueue_job_alone(" in ran[-1], ran
    assert sorted(kinds(ran[:-1])) == ["SELECT m.enqueue_shards FROM", "WITH ready AS"], ran
    # The slot, the row and the publication: one statement.
    [statement] = [s for s in ran if s.startswith("WITH ready AS")]
    assert "INSERT INTO awa.lane_commits" in statement, statement
    assert "FROM awa.queue_ring_rotations" in statement, statement


def test_an_enqueue_in_a_transaction_runs_its_call_and_three_statements_inside_it():
    awa.enqueue(noop, args={"n": 0})
    with transaction.atomic():
        ran = statements_run(lambda: awa.enqueue(noop, args={"n": 1}))
        # A second job of the transaction finds its slot pinned: no read of the ring cursor.
        again = statements_run(lambda: awa.enqueue(noop, args={"n": 2}))
    assert len(ran) == 4, ran
    assert "SELECT awa.enqueue_job(" in ran[-1], ran
    assert sorted(kinds(ran[:-1])) == [
        "INSERT INTO awa.ready_entries",
        "SELECT m.enqueue_shards FROM",
        "SELECT set_config('awa.producer_slot', r.slot",
    ], ran
    assert len(again) == 3, again


def test_an_autocommit_enqueue_announces_its_job_without_commit_callbacks(monkeypatch):
    heard: list[list[int]] = []

    def listening(sender: Any, job_ids: list[int], **kwargs: Any) -> None:
        heard.append(job_ids)

    def no_callback(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("an autocommit enqueue has committed: nothing waits for a commit")

    # On the connection itself: transaction.on_commit ends there too.
    monkeypatch.setattr(connections["default"], "on_commit", no_callback)
    job_enqueued.connect(listening, weak=False)
    try:
        job_id = awa.enqueue(noop, args={"n": 1})
    finally:
        job_enqueued.disconnect(listening)
    assert heard == [[job_id]]


def test_a_statements_rows_are_read_from_the_psycopg_cursor(monkeypatch):
    awa.enqueue(noop, args={"n": 0})
    asked: list[str] = []
    made: list[CursorWrapper] = []
    wrapped, made_by = CursorWrapper.__getattr__, CursorWrapper.__init__

    def recording(self: CursorWrapper, attr: str) -> Any:
        asked.append(attr)
        return wrapped(self, attr)

    def making(self: CursorWrapper, *args: Any) -> None:
        made.append(self)
        made_by(self, *args)

    monkeypatch.setattr(CursorWrapper, "__getattr__", recording)
    monkeypatch.setattr(CursorWrapper, "__init__", making)
    assert awa.enqueue(noop, args={"n": 1}) > 0
    # The enqueue makes no Django cursor.
    assert made == []
    with connection.cursor() as cursor:
        assert run(cursor, Statement(sql="SELECT 7", read=first_int)) == 7
    assert len(made) == 1
    assert "fetchall" not in asked, asked
