"""Where a workflow step's CPU goes against a plain job's (#34): the steps drain of
``benchmarks/workflows.py`` in a small form, profiled with cProfile, as call counts (which do
not depend on the machine's load; the times beside them do).

Usage (a throwaway cluster, as the other harnesses)::

    python3 scripts/with_postgres.py -- .venv/bin/python -m benchmarks.workflow_profile \
        [--count 2000] [--top 40] [--output PATH]

- **producer**: ``enqueue_many`` of ``--count`` plain jobs against ``awa.group`` of as many
  steps, each in one transaction, profiled in this process: calls per job, and every function
  the steps' enqueue calls at least once per step, with its calls per step.
- **worker**: one real ``awa_worker`` process (``bench=16``) run under ``python -m cProfile``
  drains ``--count`` plain jobs, then another drains a group of as many steps; the difference
  of call counts per function between the two (steps minus plain, per job), largest first:
  its start-up is the same in both and cancels out. Only the worker's main thread (the event
  loop: claims, closes) is profiled, not the handler threads.

Writes the counts to ``benchmarks/results/workflow-profile-<UTC time>.json``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.workflows import ALL_FINISHED, RESULTS_DIR, ROOT, step, until

# pstats' key of a function: (file, line, name).
FunctionKey = tuple[str, int, str]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--output", type=Path)
    return parser.parse_args(argv)


def label(key: FunctionKey) -> str:
    path, line, name = key
    return f"{'/'.join(Path(path).parts[-2:])}:{line}({name})"


def calls_of(stats: pstats.Stats) -> dict[FunctionKey, int]:
    """Each function's calls (primitive calls: a recursion counts once)."""
    table: dict[FunctionKey, tuple[Any, ...]] = stats.stats
    return {key: int(row[0]) for key, row in table.items()}


def enqueue_plain(count: int) -> None:
    import awa_django as awa
    from benchmarks.jobs import SYNC_KIND

    awa.enqueue_many(SYNC_KIND, [{"n": n, "payload": ""} for n in range(count)])


def enqueue_steps(count: int) -> None:
    import awa_django as awa

    awa.group(*(step() for _ in range(count))).enqueue()


def profile_producer(count: int, enqueue: Callable[[int], None]) -> pstats.Stats:
    from django.db import transaction

    from awa_django.testing import reset_queue

    reset_queue()
    profile = cProfile.Profile()
    with transaction.atomic():
        profile.enable()
        enqueue(count)
        profile.disable()
    reset_queue()
    return pstats.Stats(profile)


def profile_worker(count: int, enqueue: Callable[[int], None], done_sql: str) -> pstats.Stats:
    """A worker process under cProfile, from its start to its graceful stop once ``done_sql``
    holds."""
    from django.db import transaction

    from awa_django.testing import reset_queue

    reset_queue()
    with transaction.atomic():
        enqueue(count)
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "benchmarks.settings", "PYTHONUNBUFFERED": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        dump = Path(tmp) / "worker.prof"
        argv = [sys.executable, "-m", "cProfile", "-o", str(dump), "manage.py", "awa_worker",
                "--queue", "bench=16", "-v", "1"]  # fmt: skip
        proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            if "worker ready" in line:
                break
        try:
            until(done_sql, timeout_s=600)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=120)
        return pstats.Stats(str(dump))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    count = args.count
    plain = profile_producer(count, enqueue_plain)
    steps = profile_producer(count, enqueue_steps)
    per_step = {
        label(key): calls / count for key, calls in calls_of(steps).items() if calls >= count
    }
    producer = {
        "plain_calls_per_job": plain.total_calls / count,
        "steps_calls_per_step": steps.total_calls / count,
        "per_step_functions": dict(sorted(per_step.items(), key=lambda item: -item[1])),
    }
    print(
        f"producer: {producer['plain_calls_per_job']:.1f} calls per plain job, "
        f"{producer['steps_calls_per_step']:.1f} per step; functions called once or more "
        "per step (calls per step):"
    )
    for name, calls in list(producer["per_step_functions"].items())[: args.top]:
        print(f"  {calls:6.2f}  {name}")
    worker_plain = calls_of(
        profile_worker(count, enqueue_plain, f"SELECT count(*) >= {count:d} FROM awa.done_entries")
    )
    worker_steps = calls_of(profile_worker(count, enqueue_steps, ALL_FINISHED))
    extra = {
        label(key): (worker_steps.get(key, 0) - worker_plain.get(key, 0)) / count
        for key in worker_plain.keys() | worker_steps.keys()
    }
    worker = {
        "plain_calls_per_job": sum(worker_plain.values()) / count,
        "steps_calls_per_step": sum(worker_steps.values()) / count,
        "extra_calls_per_step": dict(
            sorted(((k, v) for k, v in extra.items() if v), key=lambda item: -abs(item[1]))
        ),
    }
    print(
        f"worker (start-up included): {worker['plain_calls_per_job']:.1f} calls per plain job, "
        f"{worker['steps_calls_per_step']:.1f} per step; steps minus plain, per job:"
    )
    for name, calls in list(worker["extra_calls_per_step"].items())[: args.top]:
        print(f"  {calls:+6.2f}  {name}")
    output = args.output or RESULTS_DIR / (
        f"workflow-profile-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(
        json.dumps({"count": count, "producer": producer, "worker": worker}, indent=2)
    )
    print(f"results: {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
