"""Migration 0039_spread_claims (#32) reverses and applies again: back before it, a claim of a
marked queue finds the commits its lane mark did not see by filtering every commit of the queue,
and still claims in priority order; forward again the schema is a fresh install's, the commits
are probed by transaction id, and the claims go on where the others left off."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

from awa_django import sql
from tests.migrations.catalog import claim_ready_source, current_catalog, migration_before
from tests.tasks import tasks

MIGRATION = "0039_spread_claims"


def claimed_priorities(limit: int) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT priority FROM awa.claim_ready('default', %s, 'test', 0, 0, false)", [limit]
        )
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.usefixtures("awa_db")
def test_0039_reverses_and_applies_again():
    installed = current_catalog()
    assert "u.batch < k.seen_below" in claim_ready_source()
    # More than 4 lanes: a marked queue, whose claims the migration changes.
    for priority in (-100, -1, 0, 1, 2, 50, 100):
        tasks.ranked.using(priority=priority).enqueue(str(priority))

    call_command("migrate", "awa_django", migration_before(MIGRATION), verbosity=0)
    assert "u.batch < k.seen_below" not in claim_ready_source()
    assert sql.migration(MIGRATION, "down").count("CREATE OR REPLACE FUNCTION") == 1
    # Stored at 2 - priority: Django's 100 first.
    assert claimed_priorities(2) == [-98, -48]

    call_command("migrate", "awa_django", verbosity=0)
    assert current_catalog() == installed
    tasks.ranked.using(priority=100).enqueue("100")  # a commit the mark did not see
    assert claimed_priorities(10) == [-98, 0, 1, 2, 3, 102]
