"""The measurements: COPY enqueue, single-job enqueue, and one worker process draining a queue.

Each function runs one repetition on freshly emptied awa tables and returns a ``Sample``: the
throughput, extra figures the run revealed (statement counts, process timings), and any
correctness problem found afterwards. Setup (building arguments, preloading the queue) happens
before the clock starts.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import connection

import awa_django as awa
from awa_django.testing import reset_queue

REPO_ROOT = Path(__file__).resolve().parent.parent
QUEUE = "bench"
# Size of one job's arguments as compact JSON text, the shape enqueue stores.
ARGS_BYTES = 256
# A drain that takes longer than this is stuck, not slow.
WORKER_TIMEOUT_S = 300.0


@dataclass
class Sample:
    """One repetition of one measurement."""

    jobs: int
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def jobs_per_s(self) -> float:
        return self.jobs / self.seconds


def job_args(i: int) -> dict[str, Any]:
    """Arguments for job ``i`` whose compact JSON text is exactly ``ARGS_BYTES`` long.

    The payload is hex from a hash rather than one repeated character, so nothing downstream
    (jsonb, TOAST, the network) gets an unrealistically compressible body.
    """
    digest = hashlib.sha256(str(i).encode()).hexdigest()
    overhead = len(json.dumps({"n": i, "payload": ""}, separators=(",", ":")))
    width = ARGS_BYTES - overhead
    return {"n": i, "payload": (digest * (width // len(digest) + 1))[:width]}


def reset() -> None:
    """Empty every awa table and put the rings back at genesis, as the test suite does."""
    reset_queue()


def _scalar(sql: str) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchone()[0]


def _check_ready_count(sample: Sample, expected: int) -> None:
    ready = _scalar("SELECT count(*) FROM awa.ready_entries")
    if ready != expected:
        sample.problems.append(f"{ready} ready rows after enqueueing {expected} jobs")


def measure_copy_enqueue(n: int, kind: str) -> Sample:
    """``awa.enqueue_many(kind, args_list)``: one call, one transaction, one COPY."""
    reset()
    args_list = [job_args(i) for i in range(n)]
    start = time.perf_counter()
    job_ids = awa.enqueue_many(kind, args_list)
    sample = Sample(jobs=n, seconds=time.perf_counter() - start)
    if len(job_ids) != n:
        sample.problems.append(f"enqueue_many returned {len(job_ids)} ids for {n} jobs")
    _check_ready_count(sample, n)
    return sample


def measure_single_enqueue(n: int, kind: str) -> Sample:
    """``awa.enqueue(kind, args=...)`` in a loop on an autocommit connection: a commit per job."""
    reset()
    if not connection.get_autocommit():
        raise RuntimeError("the single-enqueue loop must run in autocommit mode")
    args_list = [job_args(i) for i in range(n)]
    start = time.perf_counter()
    for args in args_list:
        awa.enqueue(kind, args=args)
    sample = Sample(jobs=n, seconds=time.perf_counter() - start)
    _check_ready_count(sample, n)
    return sample


class WorkerProcess:
    """A real ``manage.py awa_worker --burst`` subprocess, with its output timestamped."""

    def __init__(self, concurrency: int) -> None:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "benchmarks.settings",
            "PYTHONUNBUFFERED": "1",
        }
        argv = [
            sys.executable,
            "manage.py",
            "awa_worker",
            "--burst",
            "--queue",
            f"{QUEUE}={concurrency}",
            "-v",
            "1",
        ]
        self.lines: list[str] = []
        self.ready_at: float | None = None
        self.started_at = time.perf_counter()
        self.proc = subprocess.Popen(
            argv,
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if self.ready_at is None and "worker ready" in line:
                self.ready_at = time.perf_counter()
            self.lines.append(line.rstrip("\n"))

    def wait(self, timeout: float) -> tuple[int, float]:
        """Exit code and seconds from spawn to exit; kills the worker if it overstays."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            code = -9
        ended_at = time.perf_counter()
        self._reader.join(5)
        return code, ended_at - self.started_at

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


_DRAIN_STATS = """
SELECT
    (SELECT count(*) FROM awa.ready_entries) AS ready_rows,
    (SELECT count(*) FROM awa.claim_receipts) AS receipts,
    (SELECT count(*) FROM awa.done_entries WHERE outcome = 'completed') AS completed,
    (SELECT count(DISTINCT job_id) FROM awa.done_entries WHERE outcome = 'completed')
        AS completed_jobs,
    (SELECT count(*) FROM awa.done_entries WHERE outcome <> 'completed') AS other_outcomes,
    (SELECT count(*) FROM (SELECT job_id FROM awa.done_entries WHERE outcome = 'completed'
                            GROUP BY job_id HAVING count(*) > 1) AS d) AS duplicated_jobs,
    (SELECT count(*) FROM awa.ready_entries AS r
      WHERE NOT EXISTS (SELECT 1 FROM awa.done_entries AS d
                         WHERE d.job_id = r.job_id AND d.outcome = 'completed')) AS missing_jobs,
    extract(epoch FROM (SELECT max(finalized_at) FROM awa.done_entries)
                     - (SELECT min(claimed_at) FROM awa.claim_receipts))::float8 AS drain_s
"""

# A claim and a completion are each one autocommit statement, and their rows take now(), the
# transaction start, as claimed_at / finalized_at: rows sharing a timestamp (and claimer) were
# written by the same statement. That counts the hot path's round trips without
# pg_stat_statements, which the throwaway cluster does not preload.
_STATEMENT_STATS = """
SELECT
    (SELECT count(*) FROM g) AS statements,
    (SELECT avg(n)::float8 FROM g) AS mean_jobs,
    (SELECT max(n) FROM g) AS max_jobs
FROM (SELECT 1) AS one
"""
_CLAIM_GROUPS = "SELECT count(*) AS n FROM awa.claim_receipts GROUP BY claimed_by, claimed_at"
_COMPLETION_GROUPS = "SELECT count(*) AS n FROM awa.done_entries GROUP BY finalized_at"


def _statement_stats(groups_sql: str) -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute(f"WITH g AS ({groups_sql}) {_STATEMENT_STATS}")
        statements, mean_jobs, max_jobs = cursor.fetchone()
    return {"statements": statements, "mean_jobs": mean_jobs, "max_jobs": max_jobs}


def _committed_transactions() -> int:
    # Counters of other backends reach the shared stats when they exit (the worker's do before
    # we read); the snapshot of this backend must be dropped to see them.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        )
        return int(cursor.fetchone()[0])


def _machine_cpu_ticks() -> tuple[int, int] | None:
    """(busy, total) jiffies over all CPUs from /proc/stat, or None off Linux."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    ticks = [int(value) for value in fields]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return sum(ticks) - idle, sum(ticks)


def _busy_fraction(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    if before is None or after is None or after[1] == before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def warm_statistics(kind: str, n: int = 2_000) -> None:
    """Give every awa table planner statistics, then empty the tables again.

    ANALYZE after a preload cannot describe claim_receipts and done_entries, which are still
    empty then; without column statistics the planner's choices for the claim cursor depend on
    whether autovacuum happened to analyze them earlier in the run (statistics survive
    TRUNCATE), which made repetitions of one measurement incomparable. One small drain followed
    by ANALYZE puts every run in the state of a deployment where autovacuum has run once.
    """
    reset()
    awa.enqueue_many(kind, [job_args(i) for i in range(n)])
    worker = WorkerProcess(8)
    code, _ = worker.wait(WORKER_TIMEOUT_S)
    if code != 0:
        raise RuntimeError(f"warm-up worker exited with {code}:\n{worker.output}")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    reset()


def measure_drain(n: int, kind: str, concurrency: int) -> Sample:
    """One ``awa_worker --burst`` process draining ``n`` pre-enqueued no-op jobs.

    Throughput is ``n`` over the database's own clock, from the first claim to the start of the
    last completion statement: the steady drain rate, without Python and Django start-up or the
    burst-mode exit check. Process wall time (spawn to exit) is recorded alongside.
    """
    reset()
    awa.enqueue_many(kind, [job_args(i) for i in range(n)])
    # Freshly loaded tables have no statistics; a real queue that has been running would.
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    # An idle backend flushes its own pending counters within about a second: wait for that, so
    # the setup's transactions are not counted as the worker's.
    time.sleep(1.2)
    transactions_before = _committed_transactions()

    load_1min = os.getloadavg()[0]
    cpu_before = _children_cpu_s()
    machine_before = _machine_cpu_ticks()
    worker = WorkerProcess(concurrency)
    code, process_s = worker.wait(WORKER_TIMEOUT_S)
    machine_busy = _busy_fraction(machine_before, _machine_cpu_ticks())
    worker_cpu_s = _children_cpu_s() - cpu_before
    # Let the worker's backends finish exiting, which is when their counters are flushed.
    time.sleep(0.5)
    transactions = _committed_transactions() - transactions_before

    with connection.cursor() as cursor:
        cursor.execute(_DRAIN_STATS)
        names = [col.name for col in cursor.description]
        stats = dict(zip(names, cursor.fetchone(), strict=True))
    drain_s = stats.pop("drain_s")
    sample = Sample(jobs=n, seconds=drain_s if drain_s else float("nan"))
    sample.extra = {
        **stats,
        "process_s": process_s,
        # CPU the worker process used (user + system), start-up included.
        "worker_cpu_s": worker_cpu_s,
        "loadavg_1min_before": load_1min,
        # Share of all CPUs busy while the worker ran: PostgreSQL, the worker, and anything
        # else on a shared machine. Near 1.0 means CPU-bound.
        "machine_cpu_busy": machine_busy,
        "startup_s": None if worker.ready_at is None else worker.ready_at - worker.started_at,
        "worker_exit_code": code,
        "claims": _statement_stats(_CLAIM_GROUPS),
        "completions": _statement_stats(_COMPLETION_GROUPS),
        "transactions_per_job": transactions / n,
        "worker_summary": next((ln for ln in worker.lines if "worker stopped" in ln), None),
    }

    if code != 0:
        sample.problems.append(f"worker exited with {code}; output:\n{worker.output}")
    expected = {"ready_rows": n, "receipts": n, "completed": n, "completed_jobs": n}
    for key, value in expected.items():
        if stats[key] != value:
            sample.problems.append(f"{key} is {stats[key]}, expected {value}")
    for key in ("other_outcomes", "duplicated_jobs", "missing_jobs"):
        if stats[key] != 0:
            sample.problems.append(f"{key} is {stats[key]}, expected 0")
    return sample
