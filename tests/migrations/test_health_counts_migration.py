"""Migration 0034_health_counts (#36) reverses and applies again: back before it,
``awa.waiting_entries`` is gone and ``awa.drain_queue`` (which reads it) still drains a queue;
forward again the schema is a fresh install's."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection, transaction

import awa_django as awa
from tests.migrations.catalog import current_catalog, migration_before

MIGRATION = "0034_health_counts"


def has_waiting_entries() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regprocedure('awa.waiting_entries(text)') IS NOT NULL")
        return bool(cursor.fetchone()[0])


def drained(queue: str) -> int:
    # Single enqueues: a bulk enqueue's reservation needs awa.list_lane (0036_bulk_cost), which
    # the schema before this migration does not have.
    with transaction.atomic():
        for n in range(3):
            awa.enqueue("tests.noop", args={"n": n}, queue=queue)
    return awa.queues.drain(queue, confirm=True)


@pytest.mark.usefixtures("awa_db")
def test_0034_reverses_and_applies_again():
    installed = current_catalog()
    assert has_waiting_entries()

    call_command("migrate", "awa_django", migration_before(MIGRATION), verbosity=0)
    assert not has_waiting_entries()
    assert drained("default") == 3

    call_command("migrate", "awa_django", verbosity=0)
    assert current_catalog() == installed
    assert has_waiting_entries()
    assert drained("default") == 3
