"""Migration 0032_admin_filters (#36) reverses and applies again: back before it, the DLQ's
error-type and reason indexes, the backlog's held index and the DLQ's name functions are gone;
forward again the schema is a fresh install's."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

from tests.migrations.catalog import current_catalog, migration_before

MIGRATION = "0032_admin_filters"
INDEXES = ("deferred_jobs_held", "dlq_entries_error_type", "dlq_entries_reason")
FUNCTIONS = ("dlq_error_types", "dlq_kinds", "name_part_starts")


def present() -> tuple[list[str], list[str]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = 'awa' AND indexname = ANY(%s)"
            " ORDER BY 1",
            [list(INDEXES)],
        )
        indexes = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = 'awa' AND p.proname = ANY(%s) ORDER BY 1",
            [list(FUNCTIONS)],
        )
        return indexes, [row[0] for row in cursor.fetchall()]


@pytest.mark.usefixtures("awa_db")
def test_0032_reverses_and_applies_again():
    installed = current_catalog()
    assert present() == (list(INDEXES), list(FUNCTIONS))

    call_command("migrate", "awa_django", migration_before(MIGRATION), verbosity=0)
    assert present() == ([], [])

    call_command("migrate", "awa_django", verbosity=0)
    assert current_catalog() == installed
    assert present() == (list(INDEXES), list(FUNCTIONS))
