"""Migration 0026_commit_publish (#32) reverses and applies again: back before it, a
transaction's commit publishes its lane in three statements or more (the lane lock, the
lane_commits row, the record in awa.published), as 0001 defined awa.publish_ready; forward
again the schema is a fresh install's and the commit runs one statement. The jobs committed on
either side are claimable."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.loader import MigrationLoader

import awa_django as awa
from tests.commit_statements import statements_at_commit
from tests.jobs import noop
from tests.migrations.catalog import schema_catalog

MIGRATION = "0026_commit_publish"


def catalog() -> list[str]:
    with connection.cursor() as cursor:
        return schema_catalog(cursor)


def before_it() -> str:
    """The migration this one depends on last (the lead may reorder the chain at merge)."""
    loader = MigrationLoader(connection)
    return loader.get_migration("awa_django", MIGRATION).dependencies[-1][1]


@pytest.mark.usefixtures("awa_db")
def test_0026_reverses_and_applies_again():
    installed = catalog()
    ids: list[int] = []
    # A first job makes sure of the lane outside the counted transaction.
    ids.append(awa.enqueue(noop, args={"n": 0}))

    call_command("migrate", "awa_django", before_it(), verbosity=0)
    three = statements_at_commit(lambda: ids.append(awa.enqueue(noop, args={"n": 1})))
    assert len(three) >= 3, three
    assert awa.get_job(ids[-1]).state == "available"

    call_command("migrate", "awa_django", verbosity=0)
    assert catalog() == installed
    one = statements_at_commit(lambda: ids.append(awa.enqueue(noop, args={"n": 2})))
    assert len(one) == 1, one
    assert [job.state for job in awa.get_jobs(ids)] == ["available"] * 3
