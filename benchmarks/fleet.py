"""A fleet of worker processes on one server (issue #37): what it holds, what it costs idle, how
fast it drains, how fast leadership fails over.

Usage (a throwaway cluster, as the other harnesses; needs a quiet machine)::

    python3 scripts/with_postgres.py -- .venv/bin/python -m benchmarks.fleet \
        [--workers 100] [--concurrency 3] [--queue-counts 1 10] [--jobs 100000] \
        [--idle-seconds 30] [--output PATH]

For each number of queues (``q0`` ... ``q<k-1>``), ``--workers`` real ``awa_worker`` processes
each work every queue at ``--concurrency`` per queue, then:

- **connections**: the server's client backends, by ``application_name``, once all are ready;
- **idle cost**: over ``--idle-seconds`` with nothing to do, the transactions committed on the
  database (``pg_stat_database.xact_commit``), the statements run (``pg_stat_statements``, when
  the server preloads it), and the CPU the server's processes used (user + system time from
  ``/proc/<pid>/stat`` of the postmaster and its children, so the server must run on this
  machine), as a share of one core;
- **leader passes**: the durations the leader logged for its maintenance passes meanwhile;
- **failover**: the leader process is SIGKILLed; the time until another process says (in its
  runtime row) that it leads;
- **drain**: ``--jobs`` no-op jobs, spread over the queues, enqueued while the fleet runs; the
  time until every one completed. Then the same with one process whose concurrency per queue is
  the fleet's total (``workers x concurrency``).

Writes everything and the environment to ``benchmarks/results/fleet-<UTC time>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
PASS_LINE = re.compile(r"maintenance (\w+): .* duration_ms=([0-9.]+)")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=3, help="per queue and process")
    parser.add_argument("--queue-counts", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--ready-timeout", type=float, default=600.0)
    parser.add_argument("--output", type=Path)
    return parser.parse_args(argv)


class Worker:
    """One ``awa_worker`` process, its log in a file (a pipe per process would need a reader)."""

    def __init__(self, queues: dict[str, int], env: dict[str, str], logdir: Path, n: int) -> None:
        self.log_path = logdir / f"worker-{n}.log"
        self._log = self.log_path.open("wb")
        argv = [sys.executable, "manage.py", "awa_worker", "-v", "2"]
        argv += [f"--queue={name}={concurrency}" for name, concurrency in queues.items()]
        self.proc = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"worker exited ({self.proc.returncode}):\n{self.output()[-3000:]}")
        return "worker ready" in self.output()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


def start_fleet(
    count: int, queues: dict[str, int], logdir: Path, ready_timeout: float
) -> list[Worker]:
    # AWA_OVERRIDES (set by main) declares the queues; --queue picks them and their concurrency.
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "benchmarks.settings", "PYTHONUNBUFFERED": "1"}
    workers = [Worker(queues, env, logdir, n) for n in range(count)]
    deadline = time.monotonic() + ready_timeout
    while not all(w.ready() for w in workers):
        if time.monotonic() > deadline:
            raise RuntimeError("the fleet was not ready in time")
        time.sleep(0.2)
    return workers


def scalar(sql: str, params: list[Any] | None = None) -> Any:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else row[0]


def connections_by_name() -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT application_name, count(*) FROM pg_stat_activity "
            "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() GROUP BY 1"
        )
        return {name or "(none)": count for name, count in cursor.fetchall()}


def backend_parent() -> int | None:
    pid = scalar("SELECT pg_backend_pid()")
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1])


def postmaster_cpu_s(postmaster: int) -> float:
    """User + system seconds of the postmaster's children alive now (the server's processes)."""
    children = Path(f"/proc/{postmaster}/task/{postmaster}/children")
    pids = [int(p) for p in children.read_text().split()] if children.exists() else []
    total = 0
    for pid in [postmaster, *pids]:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


def enable_statement_counts() -> None:
    """pg_stat_statements in this database, when the server preloads it (else counts are None)."""
    from django.db import connection

    try:
        with connection.cursor() as cursor:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    except Exception:
        connection.close()


def statements_total() -> int | None:
    try:
        return int(scalar("SELECT sum(calls) FROM pg_stat_statements") or 0)
    except Exception:
        from django.db import connection

        connection.close()  # the failed statement left the connection unusable
        return None


def measure_idle(seconds: float) -> dict[str, Any]:
    postmaster = backend_parent()
    xact = "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
    commits0, statements0 = int(scalar(xact)), statements_total()
    cpu0 = postmaster_cpu_s(postmaster) if postmaster else None
    started = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - started
    commits1, statements1 = int(scalar(xact)), statements_total()
    cpu1 = postmaster_cpu_s(postmaster) if postmaster else None
    return {
        "seconds": elapsed,
        "transactions_per_s": (commits1 - commits0) / elapsed,
        "statements_per_s": (
            None
            if statements0 is None or statements1 is None
            else (statements1 - statements0) / elapsed
        ),
        # Processes that ended during the window (none should) are not counted.
        "server_cpu_share_of_a_core": (
            None if cpu0 is None or cpu1 is None else (cpu1 - cpu0) / elapsed
        ),
    }


def leader_instance() -> tuple[str, int] | None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT instance_id, pid FROM awa.runtime_instances WHERE is_leader "
            "AND last_seen_at > now() - interval '30 seconds' ORDER BY last_seen_at DESC LIMIT 1"
        )
        row = cursor.fetchone()
    return None if row is None else (row[0], int(row[1]))


def measure_failover(workers: list[Worker]) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while (leader := leader_instance()) is None:
        if time.monotonic() > deadline:
            return {"error": "no leader"}
        time.sleep(0.1)
    old_id, pid = leader
    victim = next(w for w in workers if w.proc.pid == pid)
    victim.proc.kill()
    killed = time.monotonic()
    while True:
        now = leader_instance()
        if now is not None and now[0] != old_id:
            return {"seconds": time.monotonic() - killed, "killed_pid": pid}
        if time.monotonic() - killed > 120:
            return {"error": "no new leader within 120 s", "killed_pid": pid}
        time.sleep(0.02)


def drain(queues: list[str], jobs: int) -> float:
    import awa_django as awa
    from benchmarks.jobs import SYNC_KIND

    started = time.monotonic()
    batch = 5000
    for start in range(0, jobs, batch):
        size = min(batch, jobs - start)
        queue = queues[(start // batch) % len(queues)]
        awa.enqueue_many(
            SYNC_KIND, [{"n": n, "payload": ""} for n in range(start, start + size)], queue=queue
        )
    while scalar("SELECT count(*) FROM awa.jobs WHERE state <> 'completed'"):
        time.sleep(0.25)
    return time.monotonic() - started


def pass_durations(workers: list[Worker]) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {}
    for worker in workers:
        for match in PASS_LINE.finditer(worker.output()):
            found.setdefault(match.group(1), []).append(float(match.group(2)))
    return found


def run_cell(args: argparse.Namespace, queue_count: int, logdir: Path) -> dict[str, Any]:
    from awa_django.testing import reset_queue

    names = [f"q{i}" for i in range(queue_count)]
    reset_queue()
    result: dict[str, Any] = {"queues": queue_count, "workers": args.workers}
    fleet = start_fleet(
        args.workers, dict.fromkeys(names, args.concurrency), logdir, args.ready_timeout
    )
    try:
        result["connections"] = connections_by_name()
        print(f"[{queue_count} queues] connections {result['connections']}", flush=True)
        result["idle"] = measure_idle(args.idle_seconds)
        print(f"[{queue_count} queues] idle {result['idle']}", flush=True)
        result["leader_pass_ms"] = pass_durations(fleet)
        result["failover"] = measure_failover(fleet)
        print(f"[{queue_count} queues] failover {result['failover']}", flush=True)
        alive = [w for w in fleet if w.proc.poll() is None]
        result["drain_fleet_s"] = drain(names, args.jobs)
        result["fleet_jobs_per_s"] = args.jobs / result["drain_fleet_s"]
        print(f"[{queue_count} queues] fleet drain {result['drain_fleet_s']:.1f} s", flush=True)
        result["leader_pass_ms"] = pass_durations(alive)
    finally:
        for worker in fleet:
            worker.stop()
    reset_queue()
    single = start_fleet(
        1, dict.fromkeys(names, args.workers * args.concurrency), logdir, args.ready_timeout
    )
    try:
        result["drain_single_s"] = drain(names, args.jobs)
        result["single_jobs_per_s"] = args.jobs / result["drain_single_s"]
        print(f"[{queue_count} queues] one process {result['drain_single_s']:.1f} s", flush=True)
    finally:
        single[0].stop()
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")
    queues = {f"q{i}": {"concurrency": args.concurrency} for i in range(max(args.queue_counts))}
    os.environ["AWA_OVERRIDES"] = json.dumps({"QUEUES": queues, "DEFAULT_QUEUE": "q0"})
    import django

    django.setup()
    from django.core.management import call_command

    from benchmarks import environment

    call_command("migrate", verbosity=0, interactive=False)
    enable_statement_counts()
    env = environment.collect()
    with tempfile.TemporaryDirectory(prefix="awa-fleet-") as logdir:
        cells = [run_cell(args, count, Path(logdir)) for count in args.queue_counts]
    env["machine"]["loadavg_at_end"] = list(os.getloadavg())
    output = args.output or RESULTS_DIR / (
        f"fleet-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(
        json.dumps({"args": {**vars(args), "output": str(output)}, "cells": cells, **env}, indent=2)
    )
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
