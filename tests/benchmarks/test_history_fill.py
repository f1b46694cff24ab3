"""The benchmarks' history builder (benchmarks/history_fill.py) leaves what a worker's drain
leaves: the same tables written, the same rows per job, the same columns set, and every
invariant of ``awa_audit`` held."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

import awa_django as awa
from awa_django.ops import audit
from benchmarks import history_fill
from tests.conftest import run_burst, truncate_awa_tables

pytestmark = pytest.mark.benchmark_smoke

JOBS = 200
# Tables a worker process writes about itself rather than about the jobs it runs (its runtime
# record, the queues, kinds and cron schedules it declares, its leader's samples, rotations and
# rescue passes): the builder runs no process; the benchmarks' workers write these when they
# start.
PROCESS_TABLES = {
    "queue_meta",
    "cron_jobs",
    "runtime_instances",
    "queue_descriptors",
    "kind_descriptors",
    "declared_versions",
    "queue_stat_samples",
    "queue_stat_rollups",
    "queue_ring_rotations",
    "lease_ring_rotations",
    "rescue_marks",
    "leader_ledger",
}


def shape() -> dict[str, tuple[int, frozenset[str]]]:
    """Each awa table (a partitioned one as a whole) with rows: its row count and the columns
    set (not NULL) in any row, with the keys of its JSON objects' top levels."""
    tables: dict[str, tuple[int, frozenset[str]]] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, array_agg(a.attname::text ORDER BY a.attnum),"
            " array_agg(format_type(a.atttypid, NULL) ORDER BY a.attnum)"
            " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped"
            " WHERE n.nspname = 'awa' AND c.relkind IN ('r', 'p') AND NOT c.relispartition"
            " GROUP BY c.relname"
        )
        for table, columns, types in cursor.fetchall():
            counts = ", ".join(f'count("{column}")' for column in columns)
            cursor.execute(f"SELECT count(*), {counts} FROM awa.{table}")
            rows, *set_in = cursor.fetchone()
            if not rows:
                continue
            written = {column for column, n in zip(columns, set_in, strict=True) if n}
            for column, kind in zip(columns, types, strict=True):
                if kind == "jsonb" and column in written:
                    cursor.execute(
                        f'SELECT DISTINCT jsonb_object_keys("{column}") FROM awa.{table}'
                        f" WHERE jsonb_typeof(\"{column}\") = 'object'"
                    )
                    written |= {f"{column}.{key}" for (key,) in cursor.fetchall()}
            tables[table] = (rows, frozenset(written))
    return tables


def job_tables(tables: dict[str, Any]) -> dict[str, Any]:
    return {table: value for table, value in tables.items() if table not in PROCESS_TABLES}


def test_a_filled_history_has_the_shape_a_drained_one_has(awa_db: None) -> None:
    awa.enqueue_many("tests.noop", [{"n": n} for n in range(JOBS)])
    # The failures in two batches, as the builder's two chunks of them below.
    for first in (0, JOBS // 2):
        awa.enqueue_many(
            "tests.always_fails",
            [{"message": f"m{n}"} for n in range(first, first + JOBS // 2)],
            max_attempts=1,
        )
    run_burst(queues={"default": 8})
    drained = shape()

    truncate_awa_tables()
    history_fill.fill(JOBS, "tests.noop", queue="default")
    history_fill.fill(
        JOBS,
        "tests.always_fails",
        queue="default",
        args=lambda n: {"message": f"m{n}"},
        failure=history_fill.Failure("builtins.RuntimeError", "boom"),
        max_attempts=1,
        chunk=JOBS // 2,
    )
    filled = shape()

    assert filled["done_entries"][0] == 2 * JOBS
    assert job_tables(filled) == job_tables(drained)
    report = audit.run()
    assert report.held, report.as_dict()


def test_a_claim_that_finds_other_jobs_stops_the_fill(awa_db: None) -> None:
    awa.enqueue("tests.noop", args={"n": -1})
    with pytest.raises(RuntimeError, match="claimed 0 of the 1 jobs enqueued and 1 others"):
        history_fill.fill(1, "tests.noop", queue="default")
