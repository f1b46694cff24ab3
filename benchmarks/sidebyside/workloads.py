"""The side-by-side workloads: each runs once on one system's fresh database.

Every function returns a flat dict of figures plus ``problems`` (correctness findings, empty
when all is well). Arguments are built before the clock starts. Jobs carry the same ~256-byte
JSON arguments as the awa_django-only benchmark (``benchmarks.scenarios.job_args``).
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

from benchmarks.scenarios import job_args
from benchmarks.sidebyside.databases import Databases, dead_tuples
from benchmarks.sidebyside.processes import (
    WORKER_TIMEOUT_S,
    MachineBusy,
    WorkerHandle,
    wait_for_total,
)
from benchmarks.sidebyside.systems.base import System

Result = dict[str, Any]
# How long an idle worker gets to connect and start listening before latency probes.
SETTLE_S = 1.0
# Outstanding-count checks after a run give acknowledgements this long to land.
ACK_GRACE_S = 30.0


def _args(n: int) -> list[dict[str, Any]]:
    return [job_args(i) for i in range(n)]


def _check_outstanding(system: System, url: str, problems: list[str]) -> None:
    deadline = time.monotonic() + ACK_GRACE_S
    with psycopg.connect(url, autocommit=True) as conn:
        while (left := system.outstanding(conn)) != 0:
            if time.monotonic() > deadline:
                problems.append(f"{left} jobs still outstanding after the run")
                return
            time.sleep(0.2)


def _stop_all(
    workers: list[WorkerHandle], expected_jobs: int | None, problems: list[str]
) -> dict[str, Any]:
    """Stop the workers; merge their records and check that no job ran twice and, unless
    ``expected_jobs`` is None, that that many distinct jobs ran."""
    records = [w.stop() for w in workers]
    finished: set[int] = set()
    executions = 0
    for record in records:
        if "problem" in record:
            problems.append(record["problem"])
        finished.update(record.get("finished_jobs", []))
        executions += record.get("executions", 0)
    duplicates = executions - len(finished)
    if duplicates:
        problems.append(f"{duplicates} duplicate executions")
    if expected_jobs is not None and len(finished) != expected_jobs:
        problems.append(f"{len(finished)} distinct jobs ran, expected {expected_jobs}")
    return {
        "records": records,
        "duplicates": duplicates,
        "peak_rss_mb": max((r.get("peak_rss_mb") or 0.0 for r in records), default=0.0),
        "worker_cpu_s": sum(r.get("cpu_s", 0.0) for r in records),
    }


def _timed_enqueue(
    dbs: Databases,
    system: System,
    jobs: int,
    enqueue: Callable[[list[dict[str, Any]]], None],
) -> Result:
    url = dbs.fresh(system)
    args = _args(jobs)
    system.open(url)
    try:
        start = time.perf_counter()
        enqueue(args)
        seconds = time.perf_counter() - start
    finally:
        system.close()
    problems: list[str] = []
    with psycopg.connect(url, autocommit=True) as conn:
        if (left := system.outstanding(conn)) != jobs:
            problems.append(f"{left} jobs outstanding after enqueueing {jobs}")
    return {"jobs": jobs, "seconds": seconds, "jobs_per_s": jobs / seconds, "problems": problems}


def enqueue_bulk(dbs: Databases, system: System, jobs: int) -> Result:
    """One call of the system's bulk path with every job."""
    return _timed_enqueue(dbs, system, jobs, system.enqueue_bulk)


def enqueue_single(dbs: Databases, system: System, jobs: int) -> Result:
    """One call per job, each committed before the next."""

    def one_by_one(args: list[dict[str, Any]]) -> None:
        for a in args:
            system.enqueue_one(a)

    return _timed_enqueue(dbs, system, jobs, one_by_one)


def drain(
    dbs: Databases, system: System, jobs: int, concurrency: int, mode: str, processes: int = 1
) -> Result:
    """``processes`` worker processes draining ``jobs`` preloaded no-op jobs.

    Throughput is ``jobs`` over the time from the first worker's start (just before the
    system's worker starts) to the return of the last handler; afterwards every system's own
    tables must show nothing outstanding, and each job must have run exactly once.
    """
    url = dbs.fresh(system)
    system.open(url)
    try:
        system.enqueue_bulk(_args(jobs), mode)
    finally:
        system.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    workers = [WorkerHandle(system.name, url, concurrency, mode) for _ in range(processes)]
    problems: list[str] = []
    busy = MachineBusy()
    try:
        for worker in workers:
            worker.wait_started()
        busy.start()
        wait_for_total(workers, jobs, WORKER_TIMEOUT_S)
        busy.stop()
    except RuntimeError as exc:
        problems.append(str(exc))
    merged = _stop_all(workers, jobs, problems)
    _check_outstanding(system, url, problems)
    records = merged.pop("records")
    starts = [r["started"] for r in records if r.get("started")]
    ends = [r["last_finish"] for r in records if r.get("last_finish")]
    seconds = (max(ends) - min(starts)) if starts and ends else float("nan")
    return {
        "jobs": jobs,
        "concurrency": concurrency,
        "mode": mode,
        "processes": processes,
        "seconds": seconds,
        "jobs_per_s": jobs / seconds,
        **merged,
        # Where the CPU went, per job: the worker processes' own, and the whole machine's
        # (workers, server and harness) while the workers drained.
        "worker_cpu_us_per_job": 1e6 * sum(r.get("work_cpu_s", 0.0) for r in records) / jobs,
        "machine_cpu_us_per_job": None if busy.busy_s is None else 1e6 * busy.busy_s / jobs,
        "machine_busy_share": busy.share,
        "problems": problems,
    }


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def pickup_latency(
    dbs: Databases, system: System, count: int, concurrency: int = 8, seed: int = 8
) -> Result:
    """An idle worker; ``count`` single enqueues 20-60 ms apart; enqueue call to handler start."""
    url = dbs.fresh(system)
    worker = WorkerHandle(system.name, url, concurrency)
    problems: list[str] = []
    sent: dict[int, float] = {}
    rng = random.Random(seed)
    args = _args(count)
    system.open(url)
    try:
        worker.wait_started()
        time.sleep(SETTLE_S)
        for i, a in enumerate(args):
            sent[i] = time.time()
            system.enqueue_one(a)
            time.sleep(rng.uniform(0.020, 0.060))
        wait_for_total([worker], count, WORKER_TIMEOUT_S)
    except RuntimeError as exc:
        problems.append(str(exc))
    finally:
        system.close()
    merged = _stop_all([worker], count, problems)
    record = merged.pop("records")[0]
    first_start: dict[int, float] = {}
    for n, at in record.get("starts", []):
        first_start.setdefault(n, at)
    latencies = [(first_start[n] - sent[n]) * 1000 for n in sent if n in first_start]
    figures = {
        f"p{int(p * 100)}_ms": _percentile(latencies, p) if latencies else float("nan")
        for p in (0.5, 0.95, 0.99)
    }
    return {
        "count": count,
        **figures,
        "max_ms": max(latencies, default=float("nan")),
        **merged,
        "problems": problems,
    }


def django_shaped(
    dbs: Databases, system: System, requests: int, threads: int = 4, concurrency: int = 32
) -> Result:
    """``threads`` request threads, each inserting a business row and enqueueing one job in
    one transaction, while one worker runs; completion rate from the first request to the
    return of the last handler."""
    url = dbs.fresh(system)
    worker = WorkerHandle(system.name, url, concurrency)
    problems: list[str] = []
    args = _args(requests)
    errors: list[BaseException] = []

    def serve(share: list[dict[str, Any]]) -> None:
        try:
            for a in share:
                system.order_and_enqueue(a)
        except BaseException as exc:
            errors.append(exc)
        finally:
            system.thread_done()

    system.open(url)
    try:
        worker.wait_started()
        time.sleep(SETTLE_S)
        pool = [threading.Thread(target=serve, args=(args[t::threads],)) for t in range(threads)]
        first_request = time.time()
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        requests_s = time.time() - first_request
        if errors:
            problems.append(f"request failed: {errors[0]!r}")
        else:
            wait_for_total([worker], requests, WORKER_TIMEOUT_S)
    except RuntimeError as exc:
        problems.append(str(exc))
        requests_s = float("nan")
    finally:
        system.close()
    merged = _stop_all([worker], requests, problems)
    record = merged.pop("records")[0]
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM bench_orders").fetchone()
        orders = int(row[0]) if row else 0
    if orders != requests:
        problems.append(f"{orders} business rows for {requests} requests")
    seconds = (record.get("last_finish") or float("nan")) - first_request
    return {
        "requests": requests,
        "threads": threads,
        "requests_per_s": requests / requests_s,
        "seconds": seconds,
        "jobs_per_s": requests / seconds,
        **merged,
        "problems": problems,
    }


def soak(
    dbs: Databases,
    system: System,
    seconds: float,
    rate: int,
    sample_s: float,
    concurrency: int = 32,
    on_sample: Callable[[dict[str, Any]], None] | None = None,
) -> Result:
    """A steady offered ``rate`` (a bulk enqueue every 100 ms) for ``seconds`` while another
    session of the same database holds a transaction open, pinning the xmin horizon."""
    url = dbs.fresh(system)
    worker = WorkerHandle(system.name, url, concurrency)
    problems: list[str] = []
    stop = threading.Event()
    enqueued = [0]
    per_tick = max(1, rate // 10)

    def produce() -> None:
        system.open(url)
        try:
            next_tick = time.monotonic()
            i = 0
            while not stop.is_set():
                system.enqueue_bulk([job_args(i + k) for k in range(per_tick)])
                i += per_tick
                enqueued[0] = i
                next_tick += 0.1
                time.sleep(max(0.0, next_tick - time.monotonic()))
        except BaseException as exc:
            problems.append(f"producer failed: {exc!r}")
        finally:
            system.close()

    samples: list[dict[str, Any]] = []
    pin = psycopg.connect(url)
    sampler = psycopg.connect(url, autocommit=True)
    try:
        pin.execute("SELECT txid_current()")
        worker.wait_started()
        producer = threading.Thread(target=produce, daemon=True)
        started = time.monotonic()
        producer.start()
        last_done, last_t = 0, 0.0
        while (elapsed := time.monotonic() - started) < seconds:
            time.sleep(min(sample_s, max(0.0, seconds - elapsed)))
            t = time.monotonic() - started
            done = worker.finished_jobs
            point = {
                "t_s": round(t, 1),
                "enqueued": enqueued[0],
                "completed": done,
                "depth": enqueued[0] - done,
                "jobs_per_s": (done - last_done) / (t - last_t),
                "dead_tuples": dead_tuples(sampler, system),
            }
            last_done, last_t = done, t
            samples.append(point)
            if on_sample is not None:
                on_sample(point)
        stop.set()
        producer.join(60)
    except RuntimeError as exc:
        problems.append(str(exc))
    finally:
        stop.set()
        pin.rollback()
        pin.close()
        sampler.close()
    # A system that falls behind the offered rate is a finding (the depth column), not a
    # failure: the backlog is not waited for, only duplicates are checked.
    merged = _stop_all([worker], None, problems)
    merged.pop("records")
    rates = [s["jobs_per_s"] for s in samples[1:]] or [s["jobs_per_s"] for s in samples]
    return {
        "seconds": seconds,
        "offered_per_s": per_tick * 10,
        "enqueued": enqueued[0],
        "samples": samples,
        "max_dead_tuples": max((s["dead_tuples"] for s in samples), default=0),
        "final_dead_tuples": samples[-1]["dead_tuples"] if samples else 0,
        "mean_jobs_per_s": statistics.fmean(rates) if rates else float("nan"),
        "max_depth": max((s["depth"] for s in samples), default=0),
        "final_depth": samples[-1]["depth"] if samples else 0,
        **merged,
        "problems": problems,
    }
