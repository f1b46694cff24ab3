"""How soon ``awa.wait`` returns after the job it waits on ends, and what the closers' check for
waiters costs when nobody waits.

Usage (a throwaway cluster, as the other harnesses)::

    python3 scripts/with_postgres.py -- .venv/bin/python -m benchmarks.wait_latency \
        [--jobs 200] [--delay-ms 20] [--close-reps 300] [--output PATH]

Two measurements:

- **wake latency**: one real ``awa_worker`` process runs ``--jobs`` jobs one after another; each
  is enqueued, then waited on with ``awa.wait``, and its handler sleeps ``--delay-ms`` first, so
  the waiter has registered before the job ends. The latency is from the job's
  ``finalized_at`` (the start of the transaction that closed it, so the close and its commit
  count against the waiter) to ``wait()`` returning, on this machine's clock, which the local
  server shares. Jobs that had ended before ``wait()`` was called are left out and counted.
- **close**: what the check for waiters costs a worker when nobody waits: the server-side
  execution time (``EXPLAIN ANALYZE``) of ``awa.close_batch`` completing 1 and 100 claimed
  attempts while ``awa.job_waiters`` is empty, against the definition migration 0004 left
  (from 0005's ``down.sql``, created under another name for the run), each statement rolled
  back so the same attempts close again; medians of ``--close-reps`` runs, interleaved.

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

from benchmarks import close_timing
from benchmarks.close_timing import percentile

RESULTS_DIR = Path(__file__).resolve().parent / "results"
# Batch sizes of the close measurement: a worker at low load closes one attempt per statement,
# a busy one up to its batch limit.
# awa.close_batch as migration 0004 left it, before it looked for waiters, under another name.


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200, help="jobs waited on (default 200)")
    parser.add_argument(
        "--delay-ms", type=float, default=20.0, help="each handler's sleep (default 20 ms)"
    )
    parser.add_argument(
        "--close-reps", type=int, default=300, help="close statements timed per variant and size"
    )
    parser.add_argument("--output", type=Path)
    return parser.parse_args(argv)


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


def measure_close(reps: int) -> dict[str, dict[str, list[float]]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.job_waiters")
        assert cursor.fetchone()[0] == 0, "awa.job_waiters must be empty while closes are timed"
    return close_timing.measure_close(
        reps, migration="0005_job_waiters", previous_label="0004 (no check)"
    )


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
    close = measure_close(args.close_reps)

    print(
        f"wake latency over {len(latencies)} jobs ({early} ended before wait() was called): "
        f"p50 {percentile(latencies, 0.5):.1f} ms, p95 {percentile(latencies, 0.95):.1f} ms, "
        f"max {max(latencies):.1f} ms"
    )
    for size, variants in close.items():
        medians = ", ".join(
            f"{name} {statistics.median(values) * 1000:.0f} µs" for name, values in variants.items()
        )
        print(f"close statement, {size}: median {medians}")
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
                "close_execution_ms": close,
            },
            indent=2,
            default=str,
        )
    )
    print(f"results: {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
