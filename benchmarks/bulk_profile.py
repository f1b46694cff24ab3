"""What one job of a bulk enqueue costs, against a bare COPY of the same rows (#32).

Usage (a throwaway cluster with ``pg_stat_statements`` tracking nested statements too, full-page
writes on; the server must run on this machine for the WAL records by kind)::

    WITH_POSTGRES_OPTIONS='-c shared_preload_libraries=pg_stat_statements \
      -c pg_stat_statements.track=all -c full_page_writes=on' \
    python3 scripts/with_postgres.py -- .venv/bin/python -m benchmarks.bulk_profile \
        [--jobs 1000] [--calls 5] [--checkpoint] [--output PATH]

For ``awa.enqueue_many`` of ``--jobs`` argument dicts (the bulk benchmark's, 1,000 a call by
default, ``--calls`` calls after a warm-up) and for the floor, a bare ``COPY`` of the same rows
(the same columns and values, the ids drawn in Python, no reservation, no publication, one
``write_row`` per row) into the same table, ``awa.ready_entries``, with its indexes: per job,

- **python_calls**: the client's Python function calls (cProfile), the floor's ``json.dumps``
  included;
- **statements** and **nested_statements**: ``pg_stat_statements`` at top level (``BEGIN``,
  the reservation, the ``COPY``, the commit's publication, ``COMMIT``) and inside functions;
- **buffers_hit**, **buffers_dirtied**, **wal_records**, **wal_fpi** and **wal_bytes** of the
  top-level statements;
- **wal_by_kind**: the WAL records between the calls' first and last position by resource
  manager and record type (``pg_waldump --stats=record``): heap inserts, one B-tree leaf insert
  per index entry, GIN pending-list updates, sequences. Needs the server's data directory.

``--checkpoint`` runs a ``CHECKPOINT`` before each call: the full-page images the calls then
write are the price of the first change to each page after it.

Writes the report to ``benchmarks/results/bulk-profile-<UTC time>.json``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.profile_setup import migrated_django, statements_monitor

RESULTS_DIR = Path(__file__).resolve().parent / "results"
ARGS = {"n": 0, "payload": "0" * 240}
FLOOR_QUEUE = "floor"
FLOOR_COPY = """COPY awa.ready_entries (queue, priority, shard, lane_seq, ready_slot,
ready_generation, job_id, kind, args, attempt, run_lease, max_attempts, run_at, created_at,
metadata, tags, errors, announce) FROM STDIN"""
STATEMENTS = """
SELECT toplevel, calls, shared_blks_hit, shared_blks_dirtied, wal_records, wal_fpi, wal_bytes,
       left(regexp_replace(query, '\\s+', ' ', 'g'), 90)
  FROM pg_stat_statements
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND query NOT ILIKE '%%pg_stat%%' AND query NOT ILIKE '%%pg_current_wal%%'
   AND query NOT ILIKE '%%CHECKPOINT%%'
 ORDER BY toplevel DESC, calls DESC
"""


def _awa(jobs: int) -> Callable[[], None]:
    import awa_django as awa
    from benchmarks.sidebyside.systems.awa_django import _kind

    kind = _kind("async")

    def call() -> None:
        awa.enqueue_many(kind, [{**ARGS, "n": n} for n in range(jobs)])

    return call


def _floor(url: str, jobs: int) -> Callable[[], None]:
    """The same rows as enqueue_many writes, copied by hand: what storing them costs at least."""
    from django.utils import timezone

    from benchmarks.sidebyside.systems.awa_django import _kind

    conn = psycopg.connect(url, autocommit=True)
    # The ring slot a producer writes to now (its pin ends with this statement's transaction).
    slot, generation = conn.execute("SELECT slot, generation FROM awa.producer_slot()").fetchone()
    kind = _kind("async")
    # Far above the sequences' values, so that the floor's rows never meet the queue's, and
    # after those of an earlier run on the same database.
    first = conn.execute(
        "SELECT coalesce(max(job_id), 1e12)::bigint + 1 FROM awa.ready_entries WHERE queue = %s",
        (FLOOR_QUEUE,),
    ).fetchone()
    next_id = [first[0] if first else 10**12]

    def call() -> None:
        now = timezone.now()
        start = next_id[0]
        next_id[0] += jobs
        with conn.transaction(), conn.cursor().copy(FLOOR_COPY) as copy:
            for n in range(jobs):
                copy.write_row(
                    (
                        FLOOR_QUEUE,
                        2,
                        0,
                        start + n,
                        slot,
                        generation,
                        start + n,
                        kind,
                        json.dumps({**ARGS, "n": n}),
                        0,
                        0,
                        25,
                        now,
                        now,
                        "{}",
                        "{}",
                        "[]",
                        False,
                    )
                )

    return call


def _python_calls(call: Callable[[], None], calls: int, jobs: int) -> float:
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(calls):
        call()
    profile.disable()
    stats: dict[Any, tuple[Any, ...]] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    return float(sum(entry[1] for entry in stats.values())) / (calls * jobs)


def _wal_by_kind(
    monitor: psycopg.Connection[Any], start: str, end: str, jobs: int
) -> dict[str, float]:
    # The server's own directories (superuser), so the pg_waldump of its version reads them.
    found = monitor.execute(
        "SELECT current_setting('data_directory'), "
        "(SELECT setting FROM pg_config WHERE name = 'BINDIR')"
    ).fetchone()
    if found is None or not (Path(found[1]) / "pg_waldump").exists():
        return {}
    datadir, waldump = found[0], str(Path(found[1]) / "pg_waldump")
    out = subprocess.run(
        [waldump, "-p", f"{datadir}/pg_wal", "-s", start, "-e", end, "--stats=record"],
        capture_output=True,
        text=True,
    ).stdout
    kinds: dict[str, float] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 2 and "/" in parts[0] and parts[1].isdigit():
            kinds[parts[0]] = int(parts[1]) / jobs
    return kinds


def _server(
    monitor: psycopg.Connection[Any],
    call: Callable[[], None],
    calls: int,
    jobs: int,
    *,
    checkpoint: bool,
) -> dict[str, Any]:
    monitor.execute("SELECT pg_stat_statements_reset()")
    start = str(monitor.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0])  # type: ignore[index]
    for _ in range(calls):
        if checkpoint:
            monitor.execute("CHECKPOINT")
        call()
    end = str(monitor.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0])  # type: ignore[index]
    rows = monitor.execute(STATEMENTS).fetchall()
    top = [row for row in rows if row[0]]
    count = calls * jobs
    return {
        "statements": sum(row[1] for row in top) / count,
        "nested_statements": sum(row[1] for row in rows if not row[0]) / count,
        "buffers_hit": sum(row[2] for row in top) / count,
        "buffers_dirtied": sum(row[3] for row in top) / count,
        "wal_records": sum(row[4] for row in top) / count,
        "wal_fpi": sum(row[5] for row in top) / count,
        "wal_bytes": float(sum(row[6] for row in top)) / count,
        "wal_by_kind": {} if checkpoint else _wal_by_kind(monitor, start, end, count),
        "by_statement": [
            {
                "toplevel": row[0],
                "calls": row[1] / calls,
                "wal_bytes": float(row[6]) / count,
                "query": row[7],
            }
            for row in rows
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--checkpoint", action="store_true")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    monitor = statements_monitor()
    migrated_django()
    report: dict[str, Any] = {"jobs": args.jobs, "calls": args.calls}
    awa_call = _awa(args.jobs)
    awa_call()  # the lane, the session's plans and caches
    floor = _floor(os.environ["DATABASE_URL"], args.jobs)
    for name, call in (("enqueue_many", awa_call), ("bare COPY", floor)):
        call()
        figures = {
            "python_calls": _python_calls(call, args.calls, args.jobs),
            **_server(monitor, call, args.calls, args.jobs, checkpoint=args.checkpoint),
        }
        report[name] = figures
        print(
            f"{name}: {figures['python_calls']:.1f} Python calls, "
            f"{figures['statements']:.4f} statements and {figures['nested_statements']:.4f} "
            f"nested, {figures['buffers_hit']:.2f} buffers hit, "
            f"{figures['buffers_dirtied']:.3f} dirtied, {figures['wal_records']:.2f} WAL records "
            f"({figures['wal_fpi']:.3f} full-page images), {figures['wal_bytes']:.0f} WAL bytes"
        )
        for kind, records in figures["wal_by_kind"].items():
            print(f"  {records:7.3f} {kind}")
        for row in figures["by_statement"]:
            level = "top   " if row["toplevel"] else "nested"
            print(f"  {level} {row['calls']:5.2f} calls {row['wal_bytes']:6.0f} B  {row['query']}")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    output = args.output or RESULTS_DIR / f"bulk-profile-{stamp}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=1))
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
