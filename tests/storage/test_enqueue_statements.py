"""What a single enqueue runs on the server, nested statements included (#32): each statement
a PL/pgSQL function runs is an executor run of its own, paid by every enqueue. Since migration
0032 the ring slot is read and pinned in one statement (``awa.producer_slot``), and an
autocommit enqueue publishes its job in one ``INSERT`` that also takes the lane lock and tries
the wake lock (``awa.enqueue_job_alone``)."""

from __future__ import annotations

import pytest
from django.db import transaction

import awa_django as awa
from tests.commit_statements import statements_run
from tests.jobs import noop

pytestmark = pytest.mark.usefixtures("awa_db")


def kinds(statements: list[str]) -> list[str]:
    """Each statement as its first words: enough to tell them apart."""
    return [" ".join(s.split()[:3]) for s in statements]


def test_an_autocommit_enqueue_runs_its_call_and_four_statements_inside_it():
    awa.enqueue(noop, args={"n": 0})  # the lane exists: no statement of its creation below
    ran = statements_run(lambda: awa.enqueue(noop, args={"n": 1}))
    assert len(ran) == 5, ran
    assert "SELECT awa.enqueue_job_alone(" in ran[-1], ran
    assert sorted(kinds(ran[:-1])) == [
        "INSERT INTO awa.lane_commits",
        "INSERT INTO awa.ready_entries",
        "SELECT m.enqueue_shards FROM",
        "SELECT set_config('awa.producer_slot', r.slot",
    ], ran


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
