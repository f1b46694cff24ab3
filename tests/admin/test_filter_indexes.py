"""The admin filters that read a big table whole before migration 0031_admin_filters (issue
#36): the DLQ's error-type, kind and reason filters read every entry (each error list
detoasted) and ``state=held`` every backlog row. Each now reads its matches from an index; the
plans are asserted by the rows they read, as the planner chooses once the tables are analyzed."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection

import awa_django as awa
from awa_django.sql import queries
from awa_django.storage.browse import JobFilter, count_in_state, list_jobs
from awa_django.storage.dlq import DlqFilter, count_matching, list_entries, matching_ids
from awa_django.storage.statement import Read, run, run_read
from tests.admin.test_hot_lane import nodes

# Rows of the common kind of each table, against a few of the filtered one.
COMMON = 5_000
RARE = 3


def explain(sql: str, params: dict[str, Any]) -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", params)
        (document,) = cursor.fetchone()
    result: dict[str, Any] = (json.loads(document) if isinstance(document, str) else document)[0]
    return result["Plan"]


def explain_last(read: Read[Any]) -> dict[str, Any]:
    """The executed plan of the last statement of ``read`` (the ones before it run as usual)."""
    steps = read.steps()
    statement = next(steps)
    with connection.cursor() as cursor:
        while True:
            last = statement
            try:
                statement = steps.send(run(cursor, statement))
            except StopIteration:
                return explain(last.sql, last.params)


def rows_read(root: dict[str, Any], table: str) -> int:
    """Rows the plan's scans of ``table`` returned or filtered out, all loops."""
    return sum(
        (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
        for node in nodes(root)
        if node.get("Relation Name") == table
    )


def dead_letters(count: int, *, error_type: str, kind: str, reason: str) -> list[int]:
    error = json.dumps({"attempt": 1, "type": error_type, "message": "order 7 not found"})
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.dlq_entries (job_id, kind, queue, priority, args, attempt,"
            " original_run_lease, max_attempts, created_at, metadata, tags, errors, dlq_reason)"
            " SELECT nextval('awa.job_id_seq'), %s, 'default', 2, '{}', 1, 1, 1, now(), '{}',"
            " '{}', jsonb_build_array(%s::jsonb), %s"
            " FROM generate_series(1, %s) RETURNING job_id",
            [kind, error, reason, count],
        )
        return sorted(row[0] for row in cursor.fetchall())


@pytest.mark.parametrize(
    "where",
    [
        DlqFilter(error_type_prefix="LookupErr"),
        DlqFilter(error_type_prefix="builtins.lookup"),
        DlqFilter(error_type="builtins.LookupError"),
        DlqFilter(kind_prefix="charge"),
        DlqFilter(reason="moved_from_failed"),
    ],
    ids=lambda where: next(f"{k}={v}" for k, v in where.params().items() if v),
)
def test_a_dlq_filter_reads_only_its_entries(awa_db, where):
    dead_letters(
        COMMON, error_type="builtins.KeyError", kind="mail.send", reason="attempts_exhausted"
    )
    rare = dead_letters(
        RARE, error_type="builtins.LookupError", kind="shop.Charge", reason="moved_from_failed"
    )
    count = explain_last(count_matching(where))
    assert count["Actual Rows"] == 1
    page = explain_last(list_entries(where, limit=50))
    walk = explain_last(matching_ids(where, limit=50))
    for root in (count, page, walk):
        assert rows_read(root, "dlq_entries") <= 2 * RARE
    assert page["Actual Rows"] == walk["Actual Rows"] == RARE
    with connection.cursor() as cursor:
        assert run_read(cursor, count_matching(where)) == RARE
        assert sorted(run_read(cursor, matching_ids(where, limit=50))) == rare


def test_held_steps_are_read_from_their_own_index(awa_db):
    awa.enqueue_many("tests.noop", [{"n": n} for n in range(COMMON)], run_at=timedelta(days=1))
    for n in range(RARE):
        awa.Workflow(f"held-{n}").step("a", "tests.noop").step(
            "b", "tests.noop", after=["a"]
        ).enqueue()
    with connection.cursor() as cursor:
        cursor.execute("SELECT job_id FROM awa.deferred_jobs WHERE state = 'held'")
        held = [row[0] for row in cursor.fetchall()]
    assert len(held) == RARE
    params = {"before": 2**63 - 1, "size": 51, "state": "held", "queue": None, "kind": None}
    root = explain(queries("browse")["deferred_job_ids"], params)
    assert root["Actual Rows"] == RARE
    assert rows_read(root, "deferred_jobs") <= RARE
    with connection.cursor() as cursor:
        page = run_read(
            cursor, list_jobs(where=JobFilter(state="held"), before=None, limit=50, count=True)
        )
        assert [job.job_id for job in page.jobs] == sorted(held, reverse=True)
        assert page.count == RARE
        assert run_read(cursor, count_in_state("held", JobFilter())) == RARE
