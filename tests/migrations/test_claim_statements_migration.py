"""Migration 0040_claim_statements (#32) reverses and applies again: back before it, a claim
reads whether its queue is paused, whether it has a lane mark and each lane's cursor in
statements of their own, and still claims in order and skips a paused queue; forward again the
schema is a fresh install's and the claims go on where the others left off."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

import awa_django as awa
from awa_django import sql
from tests.jobs import noop
from tests.migrations.catalog import claim_ready_source, current_catalog, migration_before
from tests.tasks import tasks

MIGRATION = "0040_claim_statements"
FOLDED = "WITH lane_at AS ("


def claimed_priorities(limit: int, queue: str = "default") -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT priority FROM awa.claim_ready(%s, %s, 'test', 0, 0, false)", [queue, limit]
        )
        return [row[0] for row in cursor.fetchall()]


def pause(queue: str, paused: bool) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.queue_meta (queue, paused) VALUES (%s, %s)"
            " ON CONFLICT (queue) DO UPDATE SET paused = excluded.paused",
            [queue, paused],
        )


@pytest.mark.usefixtures("awa_db")
def test_0040_reverses_and_applies_again():
    installed = current_catalog()
    assert FOLDED in claim_ready_source()
    # More than 4 lanes: a marked queue; and a second queue of one lane.
    for priority in (-100, -1, 0, 1, 2, 50, 100):
        tasks.ranked.using(priority=priority).enqueue(str(priority))
    awa.enqueue(noop, args={"n": 0}, queue="email")

    call_command("migrate", "awa_django", migration_before(MIGRATION), verbosity=0)
    assert FOLDED not in claim_ready_source()
    assert sql.migration(MIGRATION, "down").count("CREATE OR REPLACE FUNCTION") == 1
    # Stored at 2 - priority: Django's 100 first.
    assert claimed_priorities(2) == [-98, -48]
    pause("email", True)
    assert claimed_priorities(1, "email") == []

    call_command("migrate", "awa_django", verbosity=0)
    assert current_catalog() == installed
    assert claimed_priorities(1, "email") == []
    pause("email", False)
    assert len(claimed_priorities(1, "email")) == 1
    tasks.ranked.using(priority=100).enqueue("100")  # a commit the mark did not see
    assert claimed_priorities(10) == [-98, 0, 1, 2, 3, 102]
