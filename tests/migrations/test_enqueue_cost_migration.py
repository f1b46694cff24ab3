"""Migration 0031_enqueue_cost (#32) reverses and applies again: back before it, an autocommit
enqueue runs its call and seven executor runs or more inside it (the ring cursor's read and its
pin, the lane lock, and the folds of the lane's lock key and sequence name each one of their
own); forward again the schema is a fresh install's and it runs four (two since 0037, which
reads the ring's slot, writes the row and publishes it in one statement). The jobs enqueued on
either side are claimable."""

from __future__ import annotations

import pytest
from django.core.management import call_command

import awa_django as awa
from tests.commit_statements import statements_run
from tests.jobs import noop
from tests.migrations.catalog import current_catalog, migration_before

MIGRATION = "0031_enqueue_cost"


@pytest.mark.usefixtures("awa_db")
def test_0031_reverses_and_applies_again():
    installed = current_catalog()
    # A first job makes sure of the lane outside the counted statements.
    ids = [awa.enqueue(noop, args={"n": 0})]

    call_command("migrate", "awa_django", migration_before(MIGRATION), verbosity=0)
    before = statements_run(lambda: ids.append(awa.enqueue(noop, args={"n": 1})))
    assert len(before) >= 8, before
    assert awa.get_job(ids[-1]).state == "available"

    call_command("migrate", "awa_django", verbosity=0)
    assert current_catalog() == installed
    after = statements_run(lambda: ids.append(awa.enqueue(noop, args={"n": 2})))
    assert len(after) == 3, after
    assert [job.state for job in awa.get_jobs(ids)] == ["available"] * 3
