"""Migration 0025_aged_claims (#32) reverses and applies again: back at 0024, its predecessor,
awa.claim_ready is the one 0014 left (an aged claim of a marked queue reads the head of every
lane that may hold work) and still claims; forward again the schema is a fresh install's and an
aged claim walks the lanes below priority 1 first."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

from awa_django import sql
from tests.migrations.catalog import claim_ready_source, schema_catalog
from tests.tasks import tasks


def catalog() -> list[str]:
    with connection.cursor() as cursor:
        return schema_catalog(cursor)


def aged_claim() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT kind FROM awa.claim_ready('default', 1, 'test', 0, 60, false)")
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.usefixtures("awa_db")
def test_0025_reverses_to_0024_and_applies_again():
    installed = catalog()
    assert "v_urgent" in claim_ready_source()
    # More than 4 lanes: a marked queue, whose aged claims the migration changes.
    for priority in (-100, -1, 0, 1, 2, 50, 100):
        tasks.ranked.using(priority=priority).enqueue(str(priority))

    call_command("migrate", "awa_django", "0024_search_indexes", verbosity=0)
    assert "v_urgent" not in claim_ready_source()
    down = sql.migration("0025_aged_claims", "down")
    assert down.count("CREATE OR REPLACE FUNCTION") == 1
    assert aged_claim() == ["django.tasks:tests.tasks.tasks.ranked"]

    call_command("migrate", "awa_django", verbosity=0)
    assert catalog() == installed
    assert aged_claim() == ["django.tasks:tests.tasks.tasks.ranked"]
