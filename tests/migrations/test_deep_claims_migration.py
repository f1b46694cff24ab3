"""Migration 0027_deep_claims (#32) reverses and applies again: back before it, awa.claim_ready
is the one 0025 left (it sorts the rows of the commits ahead of the lane's cursor, having read
up to its limit from each: how many it reads then depends on the plan the statistics give) and
still claims in order; forward again the schema is a fresh install's and a claim reads only rows
of the commit it takes from."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

from awa_django import sql
from tests.jobs import noop
from tests.migrations.catalog import claim_ready_source, current_catalog, migration_before
from tests.storage.test_hot_path_plans import (  # noqa: F401 - plan_log is a fixture
    claim,
    plan_log,
    rows_read,
)

MIGRATION = "0027_deep_claims"
SORTED_CANDIDATES = "ORDER BY u.commit_seq, r.lane_seq"


def claim_ready_words() -> str:
    return " ".join(claim_ready_source().split())


def claim_reading(plans: list[str], limit: int) -> tuple[list[object], int]:
    """The ids a claim took and the ready rows it read."""
    plans.clear()
    claimed = [row[0] for row in claim(limit)]
    (claim_plan,) = [plan for plan in plans if "INSERT INTO awa.claim_receipts" in plan]
    return claimed, rows_read(claim_plan, "ready_entries")


@pytest.mark.usefixtures("awa_db")
def test_0027_reverses_and_applies_again(plan_log: list[str]) -> None:  # noqa: F811
    installed = current_catalog()
    job_ids = [
        job_id
        for commit in range(5)
        for job_id in noop.enqueue_many([{"n": commit * 100 + i} for i in range(100)])
    ]
    with connection.cursor() as cursor:
        cursor.execute("SET auto_explain.log_analyze = on")

    call_command("migrate", "awa_django", migration_before(MIGRATION), verbosity=0)
    assert sql.migration(MIGRATION, "down").count("CREATE OR REPLACE FUNCTION") == 1
    assert SORTED_CANDIDATES in claim_ready_words()
    assert claim_reading(plan_log, 10)[0] == job_ids[:10]

    call_command("migrate", "awa_django", verbosity=0)
    assert current_catalog() == installed
    assert SORTED_CANDIDATES not in claim_ready_words()
    claimed, read = claim_reading(plan_log, 10)
    assert claimed == job_ids[10:20]
    # From the commit it takes from alone: an ordered index scan reads the 10 rows it takes, a
    # plan that sorts that commit's rows (small tables, fresh statistics) its 90 left; never the
    # 10 from each commit ahead the old claim read. The exact bound over large commits is
    # tests/storage/test_hot_path_plans.py's.
    assert 10 <= read <= 90
