"""How the cost of a job grows with the work the database holds (#32 part 6).

Usage (it creates and drops its own databases on the server of ``DATABASE_URL``)::

    python3 scripts/with_postgres.py -- .venv/bin/python -m benchmarks.depth \\
        [--backlogs 20000 1000000] [--measure 20000] [--history 0 1000000] \\
        [--single 2000] [--reps 5] [--concurrency 128] [--builder fill|drain]

**Backlog** (``--backlogs`` with no size skips it): for each size B, a fresh database holds B
available no-op jobs (bulk-enqueued, then ``ANALYZE``) and one ``awa_worker`` process at
``--concurrency`` drains them until ``--measure`` have run; the rate is the jobs it ran over the
time from its start line to its last handler's return. The sizes alternate within each
repetition. #32 asks the rate at 1,000,000 to stay within 10 % of the rate at 20,000.

**History**: one database grows through the ``--history`` checkpoints (every completed job is
retained, as the shipped ``COMPLETED_RETENTION_S`` keeps a day). ``--builder fill`` (the
default) writes each checkpoint's jobs with ``benchmarks/history_fill.py``: enqueued in bulk,
claimed and completed set-based through the queue's own functions, in the shape a worker's
drain leaves (its test compares the two); ``--builder drain`` enqueues them in bulk and drains
them with a worker process, at the worker's rate. At each checkpoint the admin's Jobs page
(the default filters, and state=completed with its count) is rendered ``--reps`` times through
Django's test client (``benchmarks/admin_pages.py --jobs-page``, the example project's
settings), then ``--reps`` rounds of: ``--single`` single enqueues (one per transaction, the
connection in autocommit), a bulk enqueue of ``--measure`` jobs, and the drain of all of them
by one worker process. The checkpoints are measured in order on one database, so their spread
is within a checkpoint only.

Every drain checks that no job ran twice. Results go to ``benchmarks/results/depth-<UTC
time>.json``; docs/benchmarks.md ("How cost grows with work") has the figures.
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

import psycopg

from benchmarks import history_fill
from benchmarks.scenarios import job_args
from benchmarks.sidebyside.databases import Databases
from benchmarks.sidebyside.processes import WORKER_TIMEOUT_S, WorkerHandle, wait_for_total
from benchmarks.sidebyside.systems.awa_django import SYSTEM
from benchmarks.sidebyside.systems.base import QUEUE

RESULTS = Path(__file__).parent / "results"
# Jobs per bulk call while building a backlog or a history: one call's arguments stay small.
CHUNK = 50_000
# How long draining a history of this many jobs (--builder drain) may take before the run
# counts as stuck.
FILL_TIMEOUT_S = 3_600.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlogs", type=int, nargs="*", default=[20_000, 1_000_000])
    parser.add_argument("--measure", type=int, default=20_000)
    parser.add_argument("--history", type=int, nargs="+", default=[0, 1_000_000])
    parser.add_argument("--single", type=int, default=2_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument(
        "--builder",
        choices=("fill", "drain"),
        default="fill",
        help="how the history is built: set-based through the queue's functions "
        "(benchmarks/history_fill.py), or drained by a worker process",
    )
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()

    dbs = Databases(os.environ["DATABASE_URL"], prefix="depth")
    dbs.install_template(SYSTEM)
    problems: list[str] = []
    backlog: dict[int, list[float]] = {size: [] for size in args.backlogs}
    for rep in range(args.reps):
        for size in args.backlogs:
            rate = backlog_drain(dbs, size, args.measure, args.concurrency, problems)
            backlog[size].append(rate)
            print(f"rep {rep + 1} backlog {size}: {rate:,.0f} jobs/s", flush=True)

    history: dict[int, dict[str, list[float]]] = {}
    admin: dict[int, dict[str, Any]] = {}
    built: dict[int, float] = {}
    url = dbs.fresh(SYSTEM)
    held = 0
    for checkpoint in sorted(args.history):
        started = time.perf_counter()
        build(url, checkpoint - held, held, args, problems)
        built[checkpoint] = time.perf_counter() - started
        held = checkpoint
        admin[checkpoint] = jobs_page(url, args.reps)
        print(
            f"history {checkpoint}: built in {built[checkpoint]:,.0f} s; Jobs page "
            + ", ".join(
                f"{name} {page['median_ms']:,.1f} ms ({page['queries']} queries)"
                for name, page in admin[checkpoint].items()
            ),
            flush=True,
        )
        rounds: dict[str, list[float]] = {"single": [], "bulk": [], "drain": []}
        for rep in range(args.reps):
            for name, rate in history_round(url, args, problems).items():
                rounds[name].append(rate)
            print(
                f"rep {rep + 1} history {checkpoint}: "
                + ", ".join(f"{name} {values[-1]:,.0f}/s" for name, values in rounds.items()),
                flush=True,
            )
        history[checkpoint] = rounds
    dbs.drop_all(SYSTEM)

    report = {
        "args": {key: value for key, value in vars(args).items() if key != "output"},
        "backlog_jobs_per_s": {str(size): rates for size, rates in backlog.items()},
        "history_jobs_per_s": {str(size): rounds for size, rounds in history.items()},
        "history_build_s": {str(size): seconds for size, seconds in built.items()},
        "admin_jobs_page": {str(size): pages for size, pages in admin.items()},
        "summary": summary(backlog, history),
        "problems": problems,
    }
    output = args.output or RESULTS / f"depth-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    output.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report["summary"], indent=1))
    print(f"wrote {output}")
    if problems:
        raise SystemExit("problems: " + "; ".join(problems))


def backlog_drain(
    dbs: Databases, size: int, measure: int, concurrency: int, problems: list[str]
) -> float:
    url = dbs.fresh(SYSTEM)
    enqueue_in_chunks(url, size)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    return drained_rate(url, min(measure, size), concurrency, problems)


def build(url: str, jobs: int, held: int, args: argparse.Namespace, problems: list[str]) -> None:
    """Add ``jobs`` completed jobs to the ``held`` of the history, with ``args.builder``."""
    if jobs <= 0:
        return
    if args.builder == "fill":
        SYSTEM.open(url)
        # The handlers register once Django is set up (as the harness's enqueues import them).
        from benchmarks.jobs import PROBE_ASYNC_KIND

        try:
            history_fill.fill(
                jobs, PROBE_ASYNC_KIND, queue=QUEUE, args=lambda n: job_args(held + n)
            )
            history_fill.settle()
        finally:
            SYSTEM.close()
    else:
        enqueue_in_chunks(url, jobs)
        drained_rate(url, jobs, args.concurrency, problems, timeout=FILL_TIMEOUT_S)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def jobs_page(url: str, reps: int) -> dict[str, Any]:
    """The admin's Jobs page over the history ``url`` holds (benchmarks/admin_pages.py
    --jobs-page, in a process of its own: the example project's settings install the admin,
    which this harness's settings do not)."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.admin_pages", "--jobs-page", "--reps", str(reps)],
        env={
            **os.environ,
            "DATABASE_URL": url,
            "DJANGO_SETTINGS_MODULE": "example_project.settings",
        },
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise RuntimeError(f"the Jobs page's timing failed: {done.stderr[-4000:]}")
    pages: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return pages


def history_round(url: str, args: argparse.Namespace, problems: list[str]) -> dict[str, float]:
    SYSTEM.open(url)
    try:
        singles = [job_args(i) for i in range(args.single)]
        started = time.perf_counter()
        for one in singles:
            SYSTEM.enqueue_one(one)
        single = args.single / (time.perf_counter() - started)
        # Numbered after the singles: the worker's probe tells jobs apart by their number.
        many = [job_args(args.single + i) for i in range(args.measure)]
        started = time.perf_counter()
        SYSTEM.enqueue_bulk(many)
        bulk = args.measure / (time.perf_counter() - started)
    finally:
        SYSTEM.close()
    drain = drained_rate(url, args.single + args.measure, args.concurrency, problems)
    return {"single": single, "bulk": bulk, "drain": drain}


def enqueue_in_chunks(url: str, jobs: int) -> None:
    SYSTEM.open(url)
    try:
        for first in range(0, jobs, CHUNK):
            SYSTEM.enqueue_bulk([job_args(i) for i in range(first, min(first + CHUNK, jobs))])
    finally:
        SYSTEM.close()


def drained_rate(
    url: str,
    jobs: int,
    concurrency: int,
    problems: list[str],
    *,
    timeout: float = WORKER_TIMEOUT_S,
) -> float:
    """One worker process runs until ``jobs`` jobs ran; the jobs it ran over its time from its
    start line to its last handler's return."""
    worker = WorkerHandle(SYSTEM.name, url, concurrency)
    try:
        worker.wait_started()
        wait_for_total([worker], jobs, timeout)
    except RuntimeError as exc:
        problems.append(str(exc))
    record = worker.stop()
    if "problem" in record:
        problems.append(record["problem"])
    finished = len(record.get("finished_jobs", []))
    if record.get("executions", 0) != finished:
        problems.append(f"{record.get('executions', 0) - finished} duplicate executions")
    seconds = record.get("last_finish", 0.0) - record.get("started", 0.0)
    return finished / seconds if seconds > 0 else float("nan")


def summary(
    backlog: dict[int, list[float]], history: dict[int, dict[str, list[float]]]
) -> dict[str, Any]:
    def spread(values: list[float]) -> dict[str, float]:
        return {
            "median": round(statistics.median(values)),
            "min": round(min(values)),
            "max": round(max(values)),
        }

    base = statistics.median(backlog[min(backlog)]) if backlog else float("nan")
    return {
        "backlog": {
            # of_smallest: the median's share of the smallest backlog's (#32: within 10 %).
            str(size): {**spread(rates), "of_smallest": round(statistics.median(rates) / base, 3)}
            for size, rates in backlog.items()
            if rates
        },
        "history": {
            str(size): {name: spread(values) for name, values in rounds.items() if values}
            for size, rounds in history.items()
        },
    }


if __name__ == "__main__":
    main()
