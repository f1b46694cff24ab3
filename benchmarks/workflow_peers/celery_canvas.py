"""Celery's canvas on a Redis broker and result backend, the workloads of
benchmarks/workflows.py (run by it under ``.venv-peers/celery``, with ``BENCH_REDIS_URL`` set;
``python celery_canvas.py run ...`` drives, ``celery -A celery_canvas worker`` serves).

The times are the tasks' own, read from the wall clock of one machine: a member records when
its body ended, the chord's callback when its body starts. Celery counts a chord member done
once its result is stored, a little after that, so the gap measured includes the result's
write, the counter Celery keeps in Redis and the callback's trip through the broker.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis
from celery import Celery, chain, chord, group

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
app = Celery("celery_canvas", broker=REDIS_URL, backend=REDIS_URL)
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    result_expires=3600,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)
_redis = redis.Redis.from_url(REDIS_URL)
DONE = "bench:done"
ENDS = "bench:ends"
CALLBACK = "bench:callback_start"


@app.task(name="bench.noop")
def noop(*_: Any) -> None:
    """A step: takes the previous step's result, as a chain passes it on, and does nothing."""


@app.task(name="bench.count")
def count(*_: Any) -> None:
    _redis.incr(DONE)


@app.task(name="bench.member")
def member(*_: Any) -> int:
    _redis.rpush(ENDS, repr(time.time()))
    return 0


@app.task(name="bench.callback")
def callback(results: list[Any]) -> int:
    _redis.set(CALLBACK, repr(time.time()))
    return len(results)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def wait_count(target: int, timeout_s: float = 3600) -> None:
    deadline = time.monotonic() + timeout_s
    while int(_redis.get(DONE) or 0) < target:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{_redis.get(DONE)} of {target} tasks ran")
        time.sleep(0.01)


def run_chains(count_: int, length: int) -> dict[str, float]:
    started = time.perf_counter()
    results = [chain(*(noop.s() for _ in range(length))).apply_async() for _ in range(count_)]
    for result in results:
        result.get(timeout=3600)
    wall = time.perf_counter() - started
    return {"wall_s": wall, "steps_per_s": count_ * length / wall}


def run_chords(count_: int, size: int) -> dict[str, Any]:
    gaps_ms: list[float] = []
    started = time.perf_counter()
    for _ in range(count_):
        _redis.delete(ENDS, CALLBACK)
        chord([member.s() for _ in range(size)])(callback.s()).get(timeout=3600)
        last_end = max(float(v) for v in _redis.lrange(ENDS, 0, -1))
        gaps_ms.append((float(_redis.get(CALLBACK) or 0) - last_end) * 1000)
    return {
        "wall_s": time.perf_counter() - started,
        "callback_gap_ms": gaps_ms,
        "p50_ms": percentile(gaps_ms, 0.5),
        "p99_ms": percentile(gaps_ms, 0.99),
    }


def run_groups(count_: int, size: int) -> dict[str, float]:
    started = time.perf_counter()
    results = [chord([noop.s() for _ in range(size)])(callback.s()) for _ in range(count_)]
    for result in results:
        result.get(timeout=3600)
    return {"wall_s": time.perf_counter() - started}


def run_drain(count_: int) -> dict[str, float]:
    _redis.set(DONE, 0)
    started = time.perf_counter()
    for _ in range(count_):
        count.delay()
    wait_count(count_)
    plain = count_ / (time.perf_counter() - started)
    _redis.set(DONE, 0)
    started = time.perf_counter()
    group(count.s() for _ in range(count_)).apply_async()
    wait_count(count_)
    steps = count_ / (time.perf_counter() - started)
    return {"plain_jobs_per_s": plain, "steps_per_s": steps, "ratio": steps / plain}


def start_worker(concurrency: int) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "celery", "-A", "celery_canvas", "worker",
            "--concurrency", str(concurrency), "--pool", "prefork", "--loglevel", "WARNING",
            "--without-gossip", "--without-mingle", "--without-heartbeat"]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=Path(__file__).resolve().parent, env=os.environ)
    deadline = time.monotonic() + 60
    while not app.control.ping(timeout=0.5):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the Celery worker did not start")
    return proc


def with_worker(concurrency: int, body: Any) -> Any:
    _redis.flushdb()
    worker = start_worker(concurrency)
    try:
        return body()
    finally:
        worker.terminate()
        worker.wait(60)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chains", type=int, required=True)
    parser.add_argument("--chain-length", type=int, required=True)
    parser.add_argument("--chords", type=int, required=True)
    parser.add_argument("--chord-size", type=int, required=True)
    parser.add_argument("--groups", type=int, required=True)
    parser.add_argument("--group-size", type=int, required=True)
    parser.add_argument("--drain", type=int, required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    args = parser.parse_args()
    import celery

    results: dict[str, Any] = {"version": celery.__version__}
    c = args.concurrency
    results["chains"] = with_worker(c, lambda: run_chains(args.chains, args.chain_length))
    results["chords"] = with_worker(c, lambda: run_chords(args.chords, args.chord_size))
    results["groups"] = with_worker(c, lambda: run_groups(args.groups, args.group_size))
    results["drain"] = with_worker(c, lambda: run_drain(args.drain))
    results["chords"]["median_ms"] = statistics.median(results["chords"]["callback_gap_ms"])
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
