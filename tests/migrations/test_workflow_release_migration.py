"""Migration 0020_workflow_release reverses and applies again: back at 0019 the release filters
every step of the workflow for each released step, forward again it follows the edges, and the
schema is a fresh install's either way round."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

import awa_django as awa
from tests.migrations.catalog import schema_catalog
from tests.workflows.jobs import add, collect


def catalog() -> list[str]:
    with connection.cursor() as cursor:
        return schema_catalog(cursor)


def release_source() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT prosrc FROM pg_proc WHERE oid = 'awa.workflow_release'::regproc")
        return str(cursor.fetchone()[0])


@pytest.mark.usefixtures("awa_db")
def test_0020_reverses_to_0019_and_applies_again():
    installed = catalog()
    assert "JOIN awa.workflow_steps p" in release_source()

    call_command("migrate", "awa_django", "0019_console_history", verbosity=0)
    assert "JOIN awa.workflow_steps p" not in release_source()
    old = awa.chord([awa.call(add, x=1), awa.call(add, x=2)], collect).enqueue()
    assert awa.get_workflow(old.workflow_id).counts == {"released": 2, "held": 1}

    call_command("migrate", "awa_django", verbosity=0)
    assert catalog() == installed
    assert "JOIN awa.workflow_steps p" in release_source()
    new = awa.chord([awa.call(add, x=1), awa.call(add, x=2)], collect).enqueue()
    assert awa.get_workflow(new.workflow_id).counts == {"released": 2, "held": 1}
