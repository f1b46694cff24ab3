"""Bloat under a pinned MVCC horizon: jobs flow steadily while another session holds a
transaction open, and dead tuples are sampled every few seconds.

Usage (the database comes from ``DATABASE_URL``; ``make bench-pinned`` wraps it in a throwaway
PostgreSQL cluster)::

    python -m benchmarks.pinned_horizon [--seconds 600] [--rate 200] [--sample 10]
        [--workflow-rate 0]

What runs, side by side on one server:
- awa_django: a producer thread enqueues ``--rate`` jobs/s (batches every 100 ms) and one real
  ``manage.py awa_worker`` process (with the maintenance leader: rotation, prune, rescue)
  completes them;
- a naive single mutable jobs table, the shape most queues use: the same rate of rows
  inserted, then updated to running and to completed (two UPDATEs per job), as a baseline;
- with ``--workflow-rate W``, W workflows a second besides (alternately a chain of 3 steps and
  a chord of 4 members and a callback), whose tables are updated in place as steps end and
  deleted from by retention (docs/workflows.md, "What it costs");
- a session that ran ``BEGIN; SELECT txid_current();`` and then sits idle, pinning the horizon
  so that vacuum can reclaim nothing for the whole run.
Every ``--sample`` seconds it records completed jobs and ``n_dead_tup`` summed over the awa
tables (the workflow tables and ``deferred_jobs`` apart from the rest) and over the naive
table. The result is printed and written as JSON under
``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"
SETTINGS = "benchmarks.pinned_settings"

NAIVE_DDL = """
DROP TABLE IF EXISTS bench_naive_jobs;
CREATE TABLE bench_naive_jobs (
    id bigserial PRIMARY KEY, state text NOT NULL, args jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
)
"""
NAIVE_INSERT = (
    "INSERT INTO bench_naive_jobs (state, args) "
    "SELECT 'available', %s FROM generate_series(1, %s) RETURNING id"
)
NAIVE_RUN = "UPDATE bench_naive_jobs SET state = 'running', updated_at = now() WHERE id = ANY(%s)"
NAIVE_DONE = (
    "UPDATE bench_naive_jobs SET state = 'completed', updated_at = now() WHERE id = ANY(%s)"
)
# The tables that workflows update in place, and deferred_jobs, where held steps wait.
IN_PLACE = ("workflows", "workflow_steps", "workflow_edges", "deferred_jobs")
DEAD_TUPLES = """
SELECT coalesce(sum(n_dead_tup) FILTER (WHERE schemaname = 'awa'
                                          AND relname <> ALL (%(in_place)s)), 0),
       coalesce(sum(n_dead_tup) FILTER (WHERE relname = 'bench_naive_jobs'), 0),
       coalesce(sum(n_live_tup) FILTER (WHERE schemaname = 'awa'), 0),
       coalesce(sum(n_dead_tup) FILTER (WHERE schemaname = 'awa'
                                          AND relname = ANY (%(in_place)s)), 0)
  FROM pg_stat_user_tables
"""
WORKFLOWS_FINISHED = "SELECT count(*) FROM awa.workflows WHERE state <> 'running'"

COMPLETED = "SELECT count(*) FROM awa.done_entries WHERE outcome = 'completed'"
PRUNES = "SELECT max(generation) FROM awa.queue_ring_rotations"
PAYLOAD = {"n": 1, "payload": "x" * 230}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pinned_horizon")
    parser.add_argument("--seconds", type=float, default=600.0, help="how long jobs flow")
    parser.add_argument("--rate", type=int, default=200, help="jobs per second offered")
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between samples")
    parser.add_argument(
        "--workflow-rate", type=float, default=0.0, help="workflows per second offered besides"
    )
    parser.add_argument("--output", type=Path, default=None)
    return parser.parse_args(argv)


def setup_django() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def produce_awa(rate: int, stop: threading.Event, counter: list[int]) -> None:
    from django.db import connections

    from benchmarks.jobs import noop_sync

    per_tick = max(1, rate // 10)
    next_tick = time.monotonic()
    try:
        while not stop.is_set():
            noop_sync.enqueue_many([PAYLOAD] * per_tick)
            counter[0] += per_tick
            next_tick += 0.1
            time.sleep(max(0.0, next_tick - time.monotonic()))
    finally:
        connections.close_all()


def produce_workflows(rate: float, stop: threading.Event, counter: list[int]) -> None:
    from django.db import connections

    import awa_django as awa
    from awa_django.declarations.workflow_steps import Call
    from benchmarks.jobs import noop_sync

    def step() -> Call:
        return awa.call(noop_sync, n=1, payload="")

    next_tick = time.monotonic()
    try:
        while not stop.is_set():
            if counter[0] % 2:
                awa.chord([step() for _ in range(4)], step()).enqueue()
            else:
                awa.chain(step(), step(), step()).enqueue()
            counter[0] += 1
            next_tick += 1.0 / rate
            time.sleep(max(0.0, next_tick - time.monotonic()))
    finally:
        connections.close_all()


def produce_naive(url: str, rate: int, stop: threading.Event) -> None:
    per_tick = max(1, rate // 10)
    payload = json.dumps(PAYLOAD)
    next_tick = time.monotonic()
    with psycopg.connect(url, autocommit=True) as conn:
        while not stop.is_set():
            ids = [row[0] for row in conn.execute(NAIVE_INSERT, [payload, per_tick]).fetchall()]
            conn.execute(NAIVE_RUN, [ids])
            conn.execute(NAIVE_DONE, [ids])
            next_tick += 0.1
            time.sleep(max(0.0, next_tick - time.monotonic()))


def start_worker() -> subprocess.Popen[bytes]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": SETTINGS}
    return subprocess.Popen(
        [sys.executable, "manage.py", "awa_worker", "--queue", "bench=32", "-v", "1"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def sample(url: str) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(DEAD_TUPLES, {"in_place": list(IN_PLACE)}).fetchone()
        awa_dead, naive_dead, awa_live, in_place_dead = row
        (completed,) = conn.execute(COMPLETED).fetchone()
        (generation,) = conn.execute(PRUNES).fetchone()
        (workflows_finished,) = conn.execute(WORKFLOWS_FINISHED).fetchone()
    return {
        "awa_dead_tuples": int(awa_dead),
        "workflow_tables_dead_tuples": int(in_place_dead),
        "workflows_finished_retained": int(workflows_finished),
        "naive_dead_tuples": int(naive_dead),
        "awa_live_tuples": int(awa_live),
        "awa_completed_retained": int(completed),
        "queue_ring_generation": int(generation),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    url = os.environ["DATABASE_URL"]
    setup_django()
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in NAIVE_DDL.split(";"):
            if statement.strip():
                conn.execute(statement)
    pin = psycopg.connect(url)
    (pinned_xid,) = pin.execute("SELECT txid_current()").fetchone()
    worker = start_worker()
    stop = threading.Event()
    enqueued = [0]
    workflows = [0]
    threads = [
        threading.Thread(target=produce_awa, args=(args.rate, stop, enqueued), daemon=True),
        threading.Thread(target=produce_naive, args=(url, args.rate, stop), daemon=True),
    ]
    if args.workflow_rate > 0:
        threads.append(
            threading.Thread(
                target=produce_workflows, args=(args.workflow_rate, stop, workflows), daemon=True
            )
        )
    for thread in threads:
        thread.start()
    samples: list[dict[str, Any]] = []
    started = time.monotonic()
    print(f"pinned xid {pinned_xid}; sampling every {args.sample}s for {args.seconds}s")
    print(
        f"{'t_s':>6} {'awa_enq':>8} {'awa_dead':>9} {'naive_dead':>11} {'ring_gen':>9} "
        f"{'workflows':>9} {'wf_dead':>8}"
    )
    try:
        while time.monotonic() - started < args.seconds:
            time.sleep(args.sample)
            point = {
                "t_s": round(time.monotonic() - started, 1),
                "awa_enqueued": enqueued[0],
                "workflows_enqueued": workflows[0],
            }
            point.update(sample(url))
            samples.append(point)
            print(
                f"{point['t_s']:>6} {point['awa_enqueued']:>8} {point['awa_dead_tuples']:>9} "
                f"{point['naive_dead_tuples']:>11} {point['queue_ring_generation']:>9} "
                f"{point['workflows_enqueued']:>9} {point['workflow_tables_dead_tuples']:>8}",
                flush=True,
            )
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
        worker.terminate()
        worker.wait(60)
        pin.rollback()
        pin.close()
    result = {
        "benchmark": "pinned_horizon",
        "at": datetime.now(UTC).isoformat(),
        "seconds": args.seconds,
        "rate_per_s": args.rate,
        "workflow_rate_per_s": args.workflow_rate,
        "samples": samples,
    }
    RESULTS_DIR.mkdir(exist_ok=True)
    output = args.output or RESULTS_DIR / f"pinned-horizon-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    output.write_text(json.dumps(result, indent=2))
    print(f"written {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
