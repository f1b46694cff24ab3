"""Migration 0035_enqueue_lanes (#32) reverses and applies again: back before it, a
transaction that enqueues into two queues runs one statement at its commit for each queue's
lane; forward again the schema is a fresh install's and its commit runs one statement for
both. The jobs committed on either side are claimable."""

from __future__ import annotations

import pytest
from django.core.management import call_command

import awa_django as awa
from tests.commit_statements import statements_at_commit
from tests.jobs import noop
from tests.migrations.catalog import current_catalog, migration_before

MIGRATION = "0035_enqueue_lanes"


def two_queues(ids: list[int]) -> None:
    ids.append(awa.enqueue(noop, args={"n": 1}))
    ids.append(awa.enqueue(noop, args={"n": 2}, queue="email"))


@pytest.mark.usefixtures("awa_db")
def test_0035_reverses_and_applies_again():
    installed = current_catalog()
    # First jobs make sure of the lanes outside the counted transactions.
    ids = [awa.enqueue(noop, args={"n": 0}), awa.enqueue(noop, args={"n": 0}, queue="email")]

    call_command("migrate", "awa_django", migration_before(MIGRATION), verbosity=0)
    two = statements_at_commit(lambda: two_queues(ids))
    assert len(two) == 2, two

    call_command("migrate", "awa_django", verbosity=0)
    assert current_catalog() == installed
    one = statements_at_commit(lambda: two_queues(ids))
    assert len(one) == 1, one
    assert [job.state for job in awa.get_jobs(ids)] == ["available"] * 6
