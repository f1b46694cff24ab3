"""Migration 0037_enqueue_server (#32) reverses and applies again: back before it, the lanes to
publish are listed in awa.unpublished and its three arrays and an autocommit enqueue runs its
slot, row and publication as three statements; forward again the schema is a fresh install's,
the list is awa.lanes, and the autocommit enqueue runs them as one. A transaction of two
queues publishes at one statement on either side, and every job committed is claimable."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection, transaction

import awa_django as awa
from tests.commit_statements import statements_at_commit, statements_run
from tests.jobs import noop
from tests.migrations.catalog import current_catalog, migration_before

MIGRATION = "0037_enqueue_server"


def listed_in(setting: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(current_setting(%s, true), '')", [setting])
        return str(cursor.fetchone()[0])


@pytest.mark.usefixtures("awa_db")
def test_0037_reverses_and_applies_again():
    installed = current_catalog()
    ids = [awa.enqueue(noop, args={"n": 0}), awa.enqueue(noop, args={"n": 0}, queue="email")]
    settings: dict[str, str] = {}

    def two_queues() -> None:
        ids.append(awa.enqueue(noop, args={"n": 1}))
        ids.append(awa.enqueue(noop, args={"n": 1}, queue="email"))
        settings.update({name: listed_in(name) for name in ("awa.lanes", "awa.unpublished")})

    call_command("migrate", "awa_django", migration_before(MIGRATION), verbosity=0)
    alone = statements_run(lambda: ids.append(awa.enqueue(noop, args={"n": 2})))
    assert len(alone) == 5, alone
    before = statements_at_commit(two_queues)
    assert len(before) == 1, before
    assert settings["awa.lanes"] == "" and settings["awa.unpublished"].count('["') == 2

    call_command("migrate", "awa_django", verbosity=0)
    assert current_catalog() == installed
    alone = statements_run(lambda: ids.append(awa.enqueue(noop, args={"n": 2})))
    assert len(alone) == 3, alone
    after = statements_at_commit(two_queues)
    assert len(after) == 1, after
    assert settings["awa.unpublished"] == "" and settings["awa.lanes"].count('["') == 2
    with transaction.atomic():
        ids.append(awa.enqueue(noop, args={"n": 3}))
    assert [job.state for job in awa.get_jobs(ids)] == ["available"] * 9
