"""What one single enqueue costs, in counts that do not depend on the machine's load (#32).

Usage (a throwaway cluster with ``pg_stat_statements`` tracking nested statements too)::

    WITH_POSTGRES_OPTIONS='-c shared_preload_libraries=pg_stat_statements \
      -c pg_stat_statements.track=all' \
    python3 scripts/with_postgres.py -- .venv/bin/python -m benchmarks.enqueue_profile \
        [--jobs 500] [--output PATH]

For ``awa.enqueue`` in autocommit and in ``transaction.atomic()`` (one job per transaction,
after a warm-up, on one kept connection), per enqueue, and for a transaction that enqueues one
job into each of two queues (the web-shaped run's ``two`` variant), per transaction:

- **python_calls**: the client's Python function calls (cProfile);
- **statements** and **nested_statements**: what ``pg_stat_statements`` counts at top level
  (what the client sent, ``BEGIN`` and ``COMMIT`` included, and the statements of triggers that
  fire at commit) and inside functions;
- **buffers_hit** and **buffers_dirtied**: shared buffers of the top-level statements (their
  nested statements' included);
- **wal_bytes**: WAL of the top-level statements (their nested statements' included; the
  server's own ``pg_stat_wal`` lags behind a short loop);
- **client_cpu_us** and **server_cpu_us**: this process's CPU time and its backend's
  (``/proc/<pid>/schedstat``: the server must run on this machine) over a loop without the
  profiler, medians of five loops. Indicative only: they grow with the machine's load, the
  counts do not.

The per-statement rows (calls, buffers and WAL per enqueue) are printed and written with the
totals to ``benchmarks/results/enqueue-profile-<UTC time>.json``.

``--compare MIGRATION`` instead compares the server's time per enqueue with the schema at
MIGRATION (before) and at the latest migration (after), in one session, interleaved:
``--rounds`` rounds, each migrating back, running every mode's loop, migrating forward and
running them again (the order alternating between rounds). It prints, per mode and side, the
medians over the rounds of the top-level statements' execution and planning µs per unit (the
commit's publication included: it runs as a top-level statement) and of the backend's CPU µs
per unit, and each statement's mean execution and planning µs (planning needs
``-c pg_stat_statements.track_planning=on``). Relative figures: both sides share the machine's
load, which moves both.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.profile_setup import migrated_django, statements_monitor
from benchmarks.session_cost import backend_cpu_ms

RESULTS_DIR = Path(__file__).resolve().parent / "results"
ARGS = {"n": 0, "payload": "0" * 240}
STATEMENTS = """
SELECT toplevel, calls, shared_blks_hit, shared_blks_dirtied, wal_bytes,
       left(regexp_replace(query, '\\s+', ' ', 'g'), 100), total_exec_time, total_plan_time, plans
  FROM pg_stat_statements
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND query NOT ILIKE '%%pg_stat%%'
 ORDER BY toplevel DESC, calls DESC
"""


# What a loop's unit is: one enqueue of its own, one in atomic(), or a transaction of two.
AUTOCOMMIT, ATOMIC, TWO_QUEUES = "autocommit", "in a transaction", "two queues in a transaction"
SECOND_QUEUE = "bench2"


def _loop(jobs: int, *, mode: str) -> None:
    from django.db import transaction

    import awa_django as awa
    from benchmarks.sidebyside.systems.awa_django import _kind

    kind = _kind("async")
    for n in range(jobs):
        if mode == AUTOCOMMIT:
            awa.enqueue(kind, args={**ARGS, "n": n})
            continue
        with transaction.atomic():
            awa.enqueue(kind, args={**ARGS, "n": n})
            if mode == TWO_QUEUES:
                awa.enqueue(kind, args={**ARGS, "n": n}, queue=SECOND_QUEUE)


def _python_calls(jobs: int, *, mode: str) -> float:
    profile = cProfile.Profile()
    profile.enable()
    _loop(jobs, mode=mode)
    profile.disable()
    stats: dict[Any, tuple[Any, ...]] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    return float(sum(entry[1] for entry in stats.values())) / jobs


def _cpu_us(jobs: int, *, mode: str) -> tuple[float, float]:
    """This process's and its backend's CPU µs per enqueue, medians of five loops."""
    from django.db import connection

    client, server = [], []
    for _ in range(5):
        connection.ensure_connection()
        pid = connection.connection.info.backend_pid
        started, backend = time.process_time(), backend_cpu_ms(pid)
        _loop(jobs, mode=mode)
        client.append((time.process_time() - started) / jobs * 1e6)
        server.append((backend_cpu_ms(pid) - backend) / jobs * 1e3)
    return float(statistics.median(client)), float(statistics.median(server))


def _server(monitor: psycopg.Connection[Any], jobs: int, *, mode: str) -> dict[str, Any]:
    monitor.execute("SELECT pg_stat_statements_reset()")
    _loop(jobs, mode=mode)
    rows = monitor.execute(STATEMENTS).fetchall()
    top = [row for row in rows if row[0]]
    return {
        "statements": sum(row[1] for row in top) / jobs,
        "nested_statements": sum(row[1] for row in rows if not row[0]) / jobs,
        "buffers_hit": sum(row[2] for row in top) / jobs,
        "buffers_dirtied": sum(row[3] for row in top) / jobs,
        "wal_bytes": float(sum(row[4] for row in top)) / jobs,
        "by_statement": [
            {
                "toplevel": row[0],
                "calls": row[1] / jobs,
                "buffers_hit": row[2] / jobs,
                "wal_bytes": float(row[4]) / jobs,
                "query": row[5],
            }
            for row in rows
        ],
    }


def _times(monitor: psycopg.Connection[Any], jobs: int, *, mode: str) -> dict[str, Any]:
    """One loop's server time per unit: the top-level statements' execution and planning µs,
    the backend's CPU µs, and each statement's mean µs."""
    from django.db import connection

    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    monitor.execute("SELECT pg_stat_statements_reset()")
    backend = backend_cpu_ms(pid)
    _loop(jobs, mode=mode)
    cpu_us = (backend_cpu_ms(pid) - backend) / jobs * 1e3
    rows = monitor.execute(STATEMENTS).fetchall()
    top = [row for row in rows if row[0]]
    return {
        "exec_us": sum(row[6] for row in top) / jobs * 1e3,
        "plan_us": sum(row[7] for row in top) / jobs * 1e3,
        "cpu_us": cpu_us,
        "by_statement": {
            f"{'top   ' if row[0] else 'nested'} {row[5]}": (
                row[6] / row[1] * 1e3,
                row[7] / row[8] * 1e3 if row[8] else 0.0,
            )
            for row in rows
        },
    }


def _compare(monitor: psycopg.Connection[Any], before: str, *, jobs: int, rounds: int) -> None:
    """Interleaved rounds at migration ``before`` and at the latest one (``--compare``)."""
    from django.core.management import call_command

    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for round_ in range(rounds):
        sides = [("before", before), ("after", None)]
        for side, target in sides if round_ % 2 == 0 else sides[::-1]:
            call_command("migrate", "awa_django", *([target] if target else []), verbosity=0)
            for mode in (AUTOCOMMIT, ATOMIC, TWO_QUEUES):
                _loop(jobs // 5, mode=mode)  # the functions' plans after the migration
                runs.setdefault((mode, side), []).append(_times(monitor, jobs, mode=mode))
    for mode in (AUTOCOMMIT, ATOMIC, TWO_QUEUES):
        print(f"{mode}, medians of {rounds} rounds of {jobs}, µs per unit:")
        for side in ("before", "after"):
            done = runs[(mode, side)]
            exec_us, plan_us, cpu_us = (
                statistics.median(run[key] for run in done)
                for key in ("exec_us", "plan_us", "cpu_us")
            )
            print(f"  {side:6} top-level exec {exec_us:6.1f} plan {plan_us:5.1f}  "
                  f"backend CPU {cpu_us:6.1f}")  # fmt: skip
            for query in done[-1]["by_statement"]:
                means = [run["by_statement"][query] for run in done if query in run["by_statement"]]
                exec_mean = statistics.median(mean[0] for mean in means)
                plan_mean = statistics.median(mean[1] for mean in means)
                print(f"    exec {exec_mean:6.1f} plan {plan_mean:5.1f}  {query}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--output", type=Path)
    parser.add_argument("--compare", metavar="MIGRATION")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    monitor = statements_monitor()
    # The second queue of the two-queue transactions, as the web-shaped run names it.
    migrated_django({"QUEUES": {queue: {"concurrency": 8} for queue in ("bench", SECOND_QUEUE)}})
    if args.compare:
        _compare(monitor, args.compare, jobs=args.jobs, rounds=args.rounds)
        return
    report: dict[str, Any] = {"jobs": args.jobs}
    for mode in (AUTOCOMMIT, ATOMIC, TWO_QUEUES):
        _loop(args.jobs, mode=mode)  # the lane, the session's plans and caches
        client_us, server_us = _cpu_us(args.jobs, mode=mode)
        figures = {
            "python_calls": _python_calls(args.jobs, mode=mode),
            **_server(monitor, args.jobs, mode=mode),
            "client_cpu_us": client_us,
            "server_cpu_us": server_us,
        }
        report[mode] = figures
        print(
            f"{mode}: {figures['python_calls']:.1f} Python calls, "
            f"{figures['statements']:.2f} statements and {figures['nested_statements']:.2f} "
            f"nested, {figures['buffers_hit']:.1f} buffers hit, "
            f"{figures['buffers_dirtied']:.2f} dirtied, {figures['wal_bytes']:.0f} WAL bytes, "
            f"CPU client {client_us:.0f} µs, server {server_us:.0f} µs (indicative)"
        )
        for row in figures["by_statement"]:
            level = "top   " if row["toplevel"] else "nested"
            print(f"  {level} {row['calls']:5.2f} calls {row['wal_bytes']:6.0f} B  {row['query']}")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    output = args.output or RESULTS_DIR / f"enqueue-profile-{stamp}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=1))
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
