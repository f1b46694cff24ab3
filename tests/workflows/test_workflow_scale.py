"""Starting a workflow reads rows in proportion to its steps, not to their square: releasing
its roots looks up each one's dependencies through its edges. (Filtering every step of the
workflow for each released root made a 10,000-member chord take minutes to enqueue.) Counted in
tuples the transaction read, from PostgreSQL's own statistics, so the test does not time."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

import awa_django as awa
from tests.workflows.jobs import add, collect

pytestmark = pytest.mark.usefixtures("awa_db")

MEMBERS = 400


def steps_rows_read() -> int:
    """Rows of awa.workflow_steps read so far in this transaction (scans and index fetches)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) "
            "FROM pg_stat_xact_user_tables WHERE schemaname = 'awa' AND relname = 'workflow_steps'"
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def test_a_wide_chord_starts_reading_rows_in_proportion_to_its_members():
    with transaction.atomic():
        before = steps_rows_read()
        started = awa.chord([awa.call(add, x=n) for n in range(MEMBERS)], collect).enqueue()
        read = steps_rows_read() - before
    workflow = awa.get_workflow(started.workflow_id)
    assert workflow is not None
    assert workflow.counts == {"released": MEMBERS, "held": 1}
    assert workflow.step("callback").state == "held"
    # Each member's row is written, released and returned a handful of times; the quadratic
    # release read MEMBERS x (MEMBERS + 1) = 160,400 rows here.
    assert read < 20 * MEMBERS, read
