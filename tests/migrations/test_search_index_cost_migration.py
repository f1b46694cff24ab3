"""Migration 0028_search_index_cost (#32, #36) reverses and applies again: back before it, the
search indexes an enqueue writes carry no storage options (the server's pending-list limit
applies); forward again the schema is a fresh install's, options included."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

import awa_django as awa
from tests.jobs import noop
from tests.migrations.catalog import current_catalog, migration_before

MIGRATION = "0028_search_index_cost"
# Every partition of the ready ring's argument and tag indexes, and the backlog's two.
OPTIONS_SQL = """
SELECT c.relname, c.reloptions FROM pg_class c
 WHERE c.oid IN (SELECT i.inhrelid FROM pg_inherits i
                  WHERE i.inhparent IN ('awa.ready_entries_args'::regclass,
                                        'awa.ready_entries_tags'::regclass))
    OR c.oid IN ('awa.deferred_jobs_args'::regclass, 'awa.deferred_jobs_tags'::regclass)
 ORDER BY 1
"""


def options() -> dict[str, list[str] | None]:
    with connection.cursor() as cursor:
        cursor.execute(OPTIONS_SQL)
        return dict(cursor.fetchall())


@pytest.mark.usefixtures("awa_db")
def test_0028_reverses_and_applies_again():
    installed = current_catalog()
    set_ = options()
    assert len(set_) == 4 * 2 + 2
    assert set(map(tuple, set_.values())) == {("gin_pending_list_limit=16384",)}

    call_command("migrate", "awa_django", migration_before(MIGRATION), verbosity=0)
    assert set(options().values()) == {None}
    job = awa.enqueue(noop, args={"n": 1})
    assert awa.get_job(job).state == "available"

    call_command("migrate", "awa_django", verbosity=0)
    assert current_catalog() == installed
    assert options() == set_
