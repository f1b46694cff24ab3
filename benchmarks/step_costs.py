"""The server's work per workflow step against a plain job (#34), in counts that do not depend on
the machine's load: buffers, dirtied buffers, WAL bytes and statements from
``pg_stat_statements``, for the enqueue and the drain separately.

Usage (a throwaway cluster with ``pg_stat_statements`` loaded; ``track=all`` also counts the
statements that PL/pgSQL functions run, beside the top-level ones that include them)::

    WITH_POSTGRES_OPTIONS='-c shared_preload_libraries=pg_stat_statements \
        -c pg_stat_statements.track=all' \
        python3 scripts/with_postgres.py -- .venv/bin/python -m benchmarks.step_costs \
        [--count 2000] [--top 12] [--output PATH]

Four phases, each on an emptied queue with the statistics reset before it:

- **enqueue**: ``enqueue_many`` of ``--count`` plain jobs, and ``awa.group`` of as many steps,
  each in one transaction in this process;
- **drain**: one real ``awa_worker`` process (``bench=16``) drains them (the enqueue is done
  before the reset), stopped once all are done; its start-up and idle statements are counted
  too, the same for both.

Per phase: the top-level statements' totals per job (what the server did), and the
statements, nested ones included, that cost the most buffers, per job. Writes them to
``benchmarks/results/step-costs-<UTC time>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.workflow_profile import enqueue_plain, enqueue_steps
from benchmarks.workflows import ALL_FINISHED, RESULTS_DIR, start_worker, until

COUNTERS = ("buffers", "dirtied", "wal_bytes", "calls")
STATS_SQL = """
    SELECT toplevel, query, calls, shared_blks_hit + shared_blks_read, shared_blks_dirtied,
           wal_bytes
      FROM pg_stat_statements
     WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND query NOT LIKE '%%pg_stat_statements%%'
"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--output", type=Path)
    return parser.parse_args(argv)


def execute(sql: str) -> list[tuple[Any, ...]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql)
        return list(cursor.fetchall()) if cursor.description else []


def step_updates() -> tuple[int, int]:
    """Updates of ``awa.workflow_steps`` rows so far, and how many of them were HOT."""
    execute("SELECT pg_stat_force_next_flush()")
    time.sleep(1.1)  # the other backends' counts reach the shared statistics within a second
    [(updates, hot)] = execute(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
        "WHERE relid = 'awa.workflow_steps'::regclass"
    )
    return int(updates), int(hot)


def measured(count: int, top: int, body: Callable[[], None]) -> dict[str, Any]:
    """``body``'s statements since a reset of the statistics, per job, and the updates of the
    steps' rows (all and HOT) it made."""
    updates_before, hot_before = step_updates()
    execute("SELECT pg_stat_statements_reset()")
    body()
    rows = execute(STATS_SQL)
    updates_after, hot_after = step_updates()
    totals = dict.fromkeys(COUNTERS, 0.0)
    statements = []
    for toplevel, query, calls, buffers, dirtied, wal in rows:
        values = {"buffers": buffers, "dirtied": dirtied, "wal_bytes": float(wal), "calls": calls}
        if toplevel:
            for name in COUNTERS:
                totals[name] += values[name]
        statements.append(
            {"toplevel": toplevel, "query": " ".join(query.split())[:160]}
            | {name: values[name] / count for name in COUNTERS}
        )
    statements.sort(key=lambda item: -item["buffers"])
    return {
        "per_job": {n: v / count for n, v in totals.items()},
        "step_updates": updates_after - updates_before,
        "step_hot_updates": hot_after - hot_before,
        "statements": statements[:top],
    }


def enqueue_phase(count: int, top: int, enqueue: Callable[[int], None]) -> dict[str, Any]:
    from django.db import transaction

    from awa_django.testing import reset_queue

    reset_queue()

    def body() -> None:
        with transaction.atomic():
            enqueue(count)

    return measured(count, top, body)


def drain_phase(
    count: int, top: int, enqueue: Callable[[int], None], done_sql: str
) -> dict[str, Any]:
    from django.db import transaction

    from awa_django.testing import reset_queue

    reset_queue()
    with transaction.atomic():
        enqueue(count)

    def body() -> None:
        worker = start_worker(16)
        try:
            until(done_sql, timeout_s=600)
        finally:
            worker.terminate()
            worker.wait(60)

    return measured(count, top, body)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    count, top = args.count, args.top
    plain_done = f"SELECT count(*) >= {count:d} FROM awa.done_entries"
    results = {
        "enqueue": {
            "plain": enqueue_phase(count, top, enqueue_plain),
            "steps": enqueue_phase(count, top, enqueue_steps),
        },
        "drain": {
            "plain": drain_phase(count, top, enqueue_plain, plain_done),
            "steps": drain_phase(count, top, enqueue_steps, ALL_FINISHED),
        },
    }
    for phase, sides in results.items():
        for side, measure in sides.items():
            per_job = measure["per_job"]
            print(
                f"{phase} {side}: per job {per_job['buffers']:.1f} buffers, "
                f"{per_job['dirtied']:.2f} dirtied, {per_job['wal_bytes']:.0f} B WAL, "
                f"{per_job['calls']:.2f} statements; step rows updated "
                f"{measure['step_updates']}, HOT {measure['step_hot_updates']}"
            )
            for item in measure["statements"]:
                print(
                    f"    {item['buffers']:7.2f} buf {item['wal_bytes']:6.0f} B "
                    f"{item['calls']:6.2f} calls {'top ' if item['toplevel'] else 'nest'} "
                    f"{item['query'][:100]}"
                )
    output = args.output or RESULTS_DIR / (
        f"step-costs-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps({"count": count, **results}, indent=2))
    print(f"results: {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
