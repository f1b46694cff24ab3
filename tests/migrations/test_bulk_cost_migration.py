"""Migration 0036_bulk_cost (#32) reverses and applies again: back before it, ``awa.list_lane``
is gone and ``awa.enqueue_job`` lists its lane itself again (a transaction of single enqueues
into two queues still publishes at one statement); forward again the schema is a fresh
install's, and a transaction that enqueues one job and then a batch into another lane runs one
statement at its commit. The jobs committed on either side are claimable."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

import awa_django as awa
from tests.commit_statements import statements_at_commit
from tests.jobs import noop
from tests.migrations.catalog import current_catalog, migration_before

MIGRATION = "0036_bulk_cost"


def single_then_bulk(ids: list[int]) -> None:
    ids.append(awa.enqueue(noop, args={"n": 1}))
    ids.extend(awa.enqueue_many(noop, [{"n": 2}, {"n": 3}], queue="email"))


@pytest.mark.usefixtures("awa_db")
def test_0036_reverses_and_applies_again():
    installed = current_catalog()
    # First jobs make sure of the lanes outside the counted transactions.
    ids = [awa.enqueue(noop, args={"n": 0}), awa.enqueue(noop, args={"n": 0}, queue="email")]

    call_command("migrate", "awa_django", migration_before(MIGRATION), verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regproc('awa.list_lane')")
        assert cursor.fetchone() == (None,)

    def two_queues() -> None:
        ids.append(awa.enqueue(noop, args={"n": 1}))
        ids.append(awa.enqueue(noop, args={"n": 1}, queue="email"))

    before = statements_at_commit(two_queues)
    assert len(before) == 1, before

    call_command("migrate", "awa_django", verbosity=0)
    assert current_catalog() == installed
    one = statements_at_commit(lambda: single_then_bulk(ids))
    assert len(one) == 1, one
    assert [job.state for job in awa.get_jobs(ids)] == ["available"] * 7
