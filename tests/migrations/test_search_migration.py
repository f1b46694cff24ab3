"""Migration 0024_search_indexes (#36) reverses to 0023 and applies again, and without the right to
create pg_trgm it stops with a message saying what to ask for."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction

import awa_django as awa
from awa_django import sql
from tests.migrations.catalog import schema_catalog

SEARCH_INDEXES = (
    "ready_entries_args",
    "ready_entries_tags",
    "ready_entries_error_text",
    "done_entries_error_text",
    "ready_tombstones_reason",
    "dlq_entries_error_text",
)


def catalog() -> list[str]:
    with connection.cursor() as cursor:
        return schema_catalog(cursor)


def has_index(entries: list[str], name: str) -> bool:
    return any(entry.startswith(f"index:CREATE INDEX {name} ") for entry in entries)


@pytest.mark.usefixtures("awa_db")
def test_0024_reverses_and_applies_again():
    installed = catalog()
    assert all(has_index(installed, name) for name in SEARCH_INDEXES)
    assert any(entry.startswith("function:awa.error_text(jsonb)") for entry in installed)

    call_command("migrate", "awa_django", "0023_workflow_costs", verbosity=0)
    reversed_ = catalog()
    assert not any(has_index(reversed_, name) for name in SEARCH_INDEXES)
    assert not any(entry.startswith("function:awa.error_text(") for entry in reversed_)
    assert awa.get_job(awa.enqueue("tests.noop", args={"n": 1})).state == "available"

    call_command("migrate", "awa_django", verbosity=0)
    assert catalog() == installed


@pytest.mark.usefixtures("awa_db")
def test_without_pg_trgm_and_the_right_to_create_it_the_error_says_what_to_ask():
    call_command("migrate", "awa_django", "0023_workflow_costs", verbosity=0)
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("DROP EXTENSION pg_trgm")
            cursor.execute("CREATE ROLE awa_search_test NOLOGIN")
            cursor.execute("GRANT USAGE, CREATE ON SCHEMA awa TO awa_search_test")
            cursor.execute("SET LOCAL ROLE awa_search_test")
            with pytest.raises(DatabaseError) as refused, transaction.atomic():
                cursor.execute(sql.migration("0024_search_indexes", "up"))
            transaction.set_rollback(True)
        message = str(refused.value)
        assert "needs the pg_trgm extension" in message
        assert "may not create it" in message
    finally:
        call_command("migrate", "awa_django", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_extension WHERE extname = 'pg_trgm'")
        assert cursor.fetchone() == (1,)
