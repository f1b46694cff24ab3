"""How soon ``awa.wait`` returns after the job it waits on ends, and what the closers' check for
waiters costs when nobody waits.

Usage (a throwaway cluster, as the other harnesses)::

    python3 scripts/with_postgres.py -- .venv/bin/python -m benchmarks.wait_latency \
        [--jobs 200] [--delay-ms 20] [--probe-reps 300] [--output PATH]

Two measurements:

- **wake latency**: one real ``awa_worker`` process runs ``--jobs`` jobs one after another; each
  is enqueued, then waited on with ``awa.wait``, and its handler sleeps ``--delay-ms`` first, so
  the waiter has registered before the job ends. The latency is from the job's
  ``finalized_at`` (the start of the transaction that closed it, so the close and its commit
  count against the waiter) to ``wait()`` returning, on this machine's clock, which the local
  server shares. Jobs that had ended before ``wait()`` was called are left out and counted.
- **probe**: the server-side execution time (``EXPLAIN ANALYZE``) of reading a batch of 100
  closed attempts joined with the check for waiters that ``awa.close_batch`` makes, while
  ``awa.job_waiters`` is empty, against the same read without it; medians of ``--probe-reps``
  runs, interleaved.

Writes every sample and the environment to ``benchmarks/results/wait-latency-<UTC time>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"
PROBE_BATCH = 100
# A batch of closed attempts read as awa.close_batch's final SELECT reads it, with and without
# the woken CTE it joins for waiters (the same statement as in sql/functions/close.sql).
_CLOSED = (
    "WITH closed AS MATERIALIZED (SELECT g::bigint AS job_id, 'completed'::text AS outcome "
    f"FROM generate_series(1, {PROBE_BATCH}) g), "
    "woken AS (SELECT count(pg_notify('awa_job_done', c.job_id::text)) AS sent FROM closed c "
    "WHERE (SELECT EXISTS (SELECT 1 FROM awa.job_waiters)) "
    "AND c.outcome IN ('completed', 'failed', 'cancelled') "
    "AND EXISTS (SELECT 1 FROM awa.job_waiters w WHERE w.job_id = c.job_id)) "
)
PROBE_SQL = _CLOSED + "SELECT c.job_id FROM closed c CROSS JOIN woken"
BASELINE_SQL = _CLOSED + "SELECT c.job_id FROM closed c"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200, help="jobs waited on (default 200)")
    parser.add_argument(
        "--delay-ms", type=float, default=20.0, help="each handler's sleep (default 20 ms)"
    )
    parser.add_argument("--probe-reps", type=int, default=300, help="EXPLAIN runs per variant")
    parser.add_argument("--output", type=Path)
    return parser.parse_args(argv)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def start_worker() -> subprocess.Popen[str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "benchmarks.settings", "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "manage.py", "awa_worker", "--queue", "bench=4", "-v", "1"]
    proc = subprocess.Popen(
        argv, cwd=Path(__file__).resolve().parent.parent, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        if "worker ready" in line:
            return proc
    raise RuntimeError(f"the worker exited ({proc.wait()}) before it was ready")


def measure_wakes(jobs: int, delay_s: float) -> tuple[list[float], int]:
    import awa_django as awa
    from benchmarks.jobs import WAIT_KIND

    latencies: list[float] = []
    early = 0
    for _ in range(jobs):
        job_id = awa.enqueue(WAIT_KIND, args={"delay_s": delay_s})
        called = time.time()
        record = awa.wait(job_id, timeout=30)
        returned = time.time()
        assert record.finalized_at is not None
        ended = record.finalized_at.timestamp()
        if ended < called:
            early += 1
            continue
        latencies.append((returned - ended) * 1000)
    return latencies, early


def execution_ms(cursor: Any, statement: str) -> float:
    cursor.execute("EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) " + statement)
    return float(cursor.fetchone()[0][0]["Execution Time"])


def measure_probe(reps: int) -> dict[str, list[float]]:
    from django.db import connection

    samples: dict[str, list[float]] = {"with the check": [], "without": []}
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.job_waiters")
        assert cursor.fetchone()[0] == 0, "awa.job_waiters must be empty for the probe"
        for _ in range(reps):  # interleaved, so that noise lands on both alike
            samples["with the check"].append(execution_ms(cursor, PROBE_SQL))
            samples["without"].append(execution_ms(cursor, BASELINE_SQL))
    return samples


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from awa_django.testing import reset_queue
    from benchmarks import environment

    call_command("migrate", verbosity=0, interactive=False)
    reset_queue()
    env = environment.collect()
    worker = start_worker()
    try:
        latencies, early = measure_wakes(args.jobs, args.delay_ms / 1000)
    finally:
        worker.terminate()
        worker.wait(30)
    probe = measure_probe(args.probe_reps)

    print(
        f"wake latency over {len(latencies)} jobs ({early} ended before wait() was called): "
        f"p50 {percentile(latencies, 0.5):.1f} ms, p95 {percentile(latencies, 0.95):.1f} ms, "
        f"max {max(latencies):.1f} ms"
    )
    for name, values in probe.items():
        print(
            f"probe, {PROBE_BATCH} closed attempts, {name}: "
            f"median {statistics.median(values) * 1000:.1f} µs"
        )
    env["machine"]["loadavg_at_end"] = list(os.getloadavg())
    output = args.output or RESULTS_DIR / (
        f"wait-latency-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(
        json.dumps(
            {
                "environment": env,
                "parameters": vars(args) | {"output": str(output)},
                "wake_latency_ms": latencies,
                "ended_before_wait": early,
                "probe_execution_ms": probe,
            },
            indent=2,
            default=str,
        )
    )
    print(f"results: {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
