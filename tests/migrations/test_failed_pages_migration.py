"""Migration 0033_failed_pages (#36) reverses and applies again: back before it, the error text
statistics of the backlog, the kept history and the DLQ are gone; forward again the schema is a
fresh install's."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

from tests.migrations.catalog import current_catalog, migration_before

MIGRATION = "0033_failed_pages"
STATISTICS = (
    "deferred_jobs_error_text_stats",
    "dlq_entries_error_text_stats",
    "terminal_history_error_text_stats",
)


def present() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.stxname FROM pg_statistic_ext s"
            " JOIN pg_namespace n ON n.oid = s.stxnamespace"
            " WHERE n.nspname = 'awa' AND s.stxname = ANY(%s) ORDER BY 1",
            [list(STATISTICS)],
        )
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.usefixtures("awa_db")
def test_0033_reverses_and_applies_again():
    installed = current_catalog()
    assert present() == list(STATISTICS)

    call_command("migrate", "awa_django", migration_before(MIGRATION), verbosity=0)
    assert present() == []

    call_command("migrate", "awa_django", verbosity=0)
    assert current_catalog() == installed
    assert present() == list(STATISTICS)
