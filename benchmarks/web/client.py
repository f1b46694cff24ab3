"""One measurement of the web-shaped workload, in a process of its own; prints JSON.

    python -m benchmarks.web.client --system awa_django --url URL --threads 32 --work-ms 5 \\
        --variant one --seconds 8

T request threads, each on its own Django connection as a threaded web server's workers are,
send requests back to back for ``--warmup`` + ``--seconds``; only requests that start and end
inside the measured window count. A request is one transaction: the business row, the enqueue
(``one``: one job; ``two``: one job to each of two queues, in random order), then ``pg_sleep``
for the rest of the request's work, then the commit. A sampler on its own connection reads
``pg_stat_activity`` every 10 ms and counts backends waiting on a heavyweight lock, by the kind
of lock (``advisory``, ``transactionid``, ``object`` (NOTIFY's commit lock), ...).

``--connections per-request`` closes each thread's connection after every request, so the next
one connects again inside its own time: what Django does with its default ``CONN_MAX_AGE = 0``
(``kept``, the default, is a positive ``CONN_MAX_AGE`` or a pool).

``--install`` instead runs the Django half of a system's install (``migrate``) on ``--url``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
from collections import Counter
from typing import Any

import psycopg

from benchmarks.scenarios import job_args
from benchmarks.sidebyside.systems.base import ORDERS_INSERT
from benchmarks.web import CONNECTIONS, QUEUES, VARIANTS
from benchmarks.web.systems import PROTOTYPE_SYSTEMS, SYSTEMS, WebSystem, setup_django

SAMPLE_EVERY_S = 0.01
WAITS = """
SELECT wait_event, count(*)::integer FROM pg_stat_activity
 WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'
 GROUP BY wait_event
"""


def _is_deadlock(error: BaseException) -> bool:
    while error is not None:
        if isinstance(error, psycopg.errors.DeadlockDetected):
            return True
        error = error.__cause__  # type: ignore[assignment]
    return False


class Thread:
    """One request thread's loop and what it saw."""

    def __init__(self, system: WebSystem, args: argparse.Namespace, index: int) -> None:
        self.system = system
        self.work_s = args.work_ms / 1000
        self.variant = args.variant
        self.per_request = args.connections == "per-request"
        self.rng = random.Random(args.seed * 1000 + index)
        self.index = index
        # (start, end, outcome) per request, perf_counter seconds.
        self.requests: list[tuple[float, float, str]] = []
        self.errors: Counter[str] = Counter()

    def queues(self) -> tuple[str, ...]:
        if self.variant == "one":
            return (QUEUES[0],)
        if self.variant == "double":
            return (QUEUES[0], QUEUES[0])
        return tuple(self.rng.sample(QUEUES, 2))

    def request(self, n: int) -> None:
        from django.db import connection

        with self.system.transaction(), connection.cursor() as cursor:
            cursor.execute(ORDERS_INSERT, ["customer", 12.5])
            for queue in self.queues():
                self.system.enqueue(queue, job_args(n))
            if self.work_s:
                cursor.execute("SELECT pg_sleep(%s)", [self.work_s])
        if self.per_request:
            # As Django's request_finished handler does when CONN_MAX_AGE is 0.
            connection.close()

    def run(self, start: threading.Barrier, stop_at: float) -> None:
        from django.db import connections

        try:
            try:
                # Connected before the clock, as a web worker thread's connection already is.
                connections["default"].ensure_connection()
            except Exception:
                start.abort()
                raise
            start.wait()
            n = self.index * 10_000_000
            while (begun := time.perf_counter()) < stop_at:
                n += 1
                try:
                    self.request(n)
                    outcome = "ok"
                except Exception as error:
                    outcome = "deadlock" if _is_deadlock(error) else "error"
                    self.errors[f"{type(error).__name__}: {error}"[:200]] += 1
                self.requests.append((begun, time.perf_counter(), outcome))
        finally:
            connections.close_all()


def _sample_waits(url: str, stop: threading.Event, samples: list[Counter[str]]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        while not stop.is_set():
            rows = conn.execute(WAITS).fetchall()
            samples.append(Counter({str(event): int(count) for event, count in rows}))
            stop.wait(SAMPLE_EVERY_S)


def _machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy (all CPUs), from /proc/stat."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def measure(system: WebSystem, args: argparse.Namespace) -> dict[str, Any]:
    system.open(args.url)
    threads = [Thread(system, args, i) for i in range(args.threads)]
    start = threading.Barrier(args.threads + 1)
    begin = time.perf_counter() + 0.5
    window = (begin + args.warmup, begin + args.warmup + args.seconds)
    workers = [
        threading.Thread(target=t.run, args=(start, window[1]), daemon=True) for t in threads
    ]
    for worker in workers:
        worker.start()
    start.wait()
    samples: list[Counter[str]] = []
    stop_sampling = threading.Event()
    sampler = threading.Thread(target=_sample_waits, args=(args.url, stop_sampling, samples))
    time.sleep(max(0.0, window[0] - time.perf_counter()))
    sampler.start()
    cpu_start, busy_start = time.process_time(), _machine_busy_s()
    time.sleep(max(0.0, window[1] - time.perf_counter()))
    cpu_s, busy_s = time.process_time() - cpu_start, _machine_busy_s() - busy_start
    for worker in workers:
        worker.join()
    stop_sampling.set()
    sampler.join()
    system.close()

    counted = [
        (end - begun, outcome)
        for t in threads
        for begun, end, outcome in t.requests
        if begun >= window[0] and end <= window[1]
    ]
    latencies = [latency * 1000 for latency, outcome in counted if outcome == "ok"]
    errors: Counter[str] = Counter()
    for t in threads:
        errors.update(t.errors)
    waits: Counter[str] = Counter()
    for sample in samples:
        waits.update(sample)
    return {
        "system": system.name,
        "threads": args.threads,
        "work_ms": args.work_ms,
        "variant": args.variant,
        "connections": args.connections,
        "seconds": args.seconds,
        "requests": len(latencies),
        "requests_per_s": len(latencies) / args.seconds,
        "p50_ms": statistics.median(latencies) if latencies else None,
        "p99_ms": _percentile(latencies, 99) if latencies else None,
        "deadlocks": sum(1 for _, outcome in counted if outcome == "deadlock"),
        "errors": sum(1 for _, outcome in counted if outcome == "error"),
        "error_messages": dict(errors.most_common(5)),
        # Mean number of backends waiting on a heavyweight lock, per kind, over the samples.
        "lock_waits": {event: count / max(1, len(samples)) for event, count in waits.items()},
        "lock_wait_samples": len(samples),
        # Over the measured window: this process's CPU (the request threads, all in one
        # interpreter) and the whole machine's (client, server, everything else), per request.
        "client_cpu_per_request_us": cpu_s / max(1, len(latencies)) * 1e6,
        "machine_cpu_per_request_us": busy_s / max(1, len(latencies)) * 1e6,
        "machine_busy_share": busy_s / args.seconds / (os.cpu_count() or 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.web.client")
    add = parser.add_argument
    add("--system", choices=[*SYSTEMS, *PROTOTYPE_SYSTEMS], required=True)
    add("--url", required=True)
    add("--install", action="store_true")
    add("--threads", type=int, default=8)
    add("--work-ms", type=float, default=5.0)
    add("--variant", choices=VARIANTS, default="one")
    add("--connections", choices=CONNECTIONS, default="kept")
    add("--seconds", type=float, default=8.0)
    add("--warmup", type=float, default=1.0)
    add("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    setup_django(args.url)
    system = {**SYSTEMS, **PROTOTYPE_SYSTEMS}[args.system]
    if args.install:
        system.install_in_client()
        return 0
    json.dump(measure(system, args), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
