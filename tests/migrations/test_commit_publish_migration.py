"""Migration 0026_commit_publish (#32) reverses and applies again: back before it, a
transaction's commit publishes its lane in three statements or more (the lane lock, the
lane_commits row, the record in awa.published), as 0001 defined awa.publish_ready; forward
again the schema is a fresh install's and the commit runs one statement. The jobs committed on
either side are claimable."""

from __future__ import annotations

import pytest
from django.core.management import call_command

import awa_django as awa
from tests.commit_statements import statements_at_commit
from tests.jobs import noop
from tests.migrations.catalog import current_catalog, migration_before

MIGRATION = "0026_commit_publish"


@pytest.mark.usefixtures("awa_db")
def test_0026_reverses_and_applies_again():
    installed = current_catalog()
    ids: list[int] = []
    # A first job makes sure of the lane outside the counted transaction.
    ids.append(awa.enqueue(noop, args={"n": 0}))

    call_command("migrate", "awa_django", migration_before(MIGRATION), verbosity=0)
    three = statements_at_commit(lambda: ids.append(awa.enqueue(noop, args={"n": 1})))
    assert len(three) >= 3, three
    assert awa.get_job(ids[-1]).state == "available"

    call_command("migrate", "awa_django", verbosity=0)
    assert current_catalog() == installed
    one = statements_at_commit(lambda: ids.append(awa.enqueue(noop, args={"n": 2})))
    assert len(one) == 1, one
    assert [job.state for job in awa.get_jobs(ids)] == ["available"] * 3
