"""What a queue's number of priority lanes costs a claim.

Usage (a throwaway cluster, as the other harnesses)::

    python3 scripts/with_postgres.py -- .venv/bin/python -m benchmarks.priority_claims \
        [--jobs 3000] [--reps 3] [--batch 10] [--output PATH]

Each sample drains ``--jobs`` ready jobs of one queue with claims of ``--batch`` jobs, the way a
worker's dispatcher claims (``awa.claim_ready`` on an autocommit psycopg connection; claims
only, no completions, so the figure is the claim path alone), and reports claimed jobs per
second. The layouts:

- **1 priority**: every job in one lane, the ceiling;
- **4 priorities**: spread evenly over the native priorities 1..4;
- **201 priorities**: spread evenly over every lane a django.tasks priority -100..100 is stored
  at, so the busy lanes drain from the most urgent down and later claims pass drained ones;
- **1 busy of 201**: 201 lanes exist (a queue that once saw every Django priority keeps its
  lanes: each had a job, claimed before the sample starts), and every job is in the least
  urgent one, behind 200 drained lanes.

Each layout is drained twice: with static order (``aging_s`` 0, which is most of a worker's
claims) and with aged order (``aging_s`` 60, which reads every lane's head; a worker makes such
a claim at most once a second per queue). Repetitions are interleaved (every variant once, then
every variant again) and reported as the median and range.

Writes every sample and the environment to ``benchmarks/results/priority-claims-<UTC>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from benchmarks.environment import git_info, machine_info

RESULTS_DIR = Path(__file__).resolve().parent / "results"
QUEUE = "bench"
NATIVE = (1, 2, 3, 4)
# Every lane priority a django.tasks job can be stored at (awa_django.declarations.priorities).
ALL_DJANGO = tuple(range(-98, 103))
LAYOUTS: dict[str, tuple[Sequence[int], Sequence[int]]] = {
    # name: (lanes holding the jobs, lanes that held one job, drained before the sample)
    "1 priority": ((2,), ()),
    "4 priorities": (NATIVE, ()),
    "201 priorities": (ALL_DJANGO, ()),
    "1 busy of 201": ((102,), range(-98, 102)),
}
AGING = {"static": 0.0, "aged": 60.0}
CLAIM = "SELECT count(*) FROM awa.claim_ready(%s, %s, 'bench:priority_claims', 0, %s, false)"


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def add_jobs(priority: int, count: int) -> None:
    """``count`` committed ready jobs in the lane of ``priority``, with one COPY."""
    from django.db import connection, transaction
    from django.utils import timezone

    from awa_django.storage import queue as queue_storage
    from awa_django.storage.copy_text import CopyBatch
    from awa_django.storage.statement import run_copy

    now = timezone.now()
    batch = CopyBatch(
        queue=QUEUE,
        priority=priority,
        kind="bench.noop",
        count=count,
        max_attempts=25,
        metadata_json="{}",
        tags=(),
        run_at=now,
        now=now,
    )
    with transaction.atomic(), connection.cursor() as cursor:
        run_copy(cursor, queue_storage.copy_ready(batch, (f'{{"n":{n}}}' for n in range(count))))


def fill(url: str, jobs: int, busy: Sequence[int], drained: Sequence[int]) -> None:
    """An empty awa schema with the ``drained`` lanes, then ``jobs`` ready jobs spread evenly
    over ``busy``."""
    from awa_django.testing import reset_queue

    reset_queue()
    for priority in drained:
        add_jobs(priority, 1)
    drain(url, len(drained), 100, 0.0)
    for index, priority in enumerate(busy):
        add_jobs(priority, jobs // len(busy) + (1 if index < jobs % len(busy) else 0))


def drain(url: str, jobs: int, batch: int, aging_s: float) -> float:
    """Claimed jobs per second, claiming until the queue is empty."""
    claimed = 0
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        while True:
            row = conn.execute(CLAIM, [QUEUE, batch, aging_s]).fetchone()
            got = row[0] if row else 0
            if not got:
                break
            claimed += got
        elapsed = time.perf_counter() - started
    if claimed != jobs:
        raise RuntimeError(f"claimed {claimed} of {jobs} jobs")
    return claimed / elapsed


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.priority_claims")
    parser.add_argument("--jobs", type=int, default=3000, help="jobs drained per sample")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=10, help="jobs per claim")
    parser.add_argument("--output", type=Path, default=None)
    options = parser.parse_args(argv)
    url = os.environ.get("DATABASE_URL")
    if not url:
        print("DATABASE_URL is not set (run under scripts/with_postgres.py)", file=sys.stderr)
        return 2
    setup_django()
    started = datetime.now(UTC)
    samples: dict[str, dict[str, list[float]]] = {
        layout: {mode: [] for mode in AGING} for layout in LAYOUTS
    }
    for _ in range(options.reps):
        for layout, (busy, drained) in LAYOUTS.items():
            for mode, aging_s in AGING.items():
                fill(url, options.jobs, busy, drained)
                samples[layout][mode].append(drain(url, options.jobs, options.batch, aging_s))
    ceiling = {mode: statistics.median(samples["1 priority"][mode]) for mode in AGING}
    print(
        f"claimed jobs/s draining {options.jobs:,} jobs, {options.batch} per claim, "
        f"median (min-max) of {options.reps}; share of the 1-priority ceiling:"
    )
    for layout, modes in samples.items():
        print(
            f"  {layout}: "
            + "; ".join(
                f"{mode} {summary(values)} ({statistics.median(values) / ceiling[mode]:.0%})"
                for mode, values in modes.items()
            )
        )
    with psycopg.connect(url) as conn:
        server = conn.execute("SELECT version()").fetchone()
    output = options.output or RESULTS_DIR / f"priority-claims-{started:%Y%m%dT%H%M%SZ}.json"
    output.write_text(
        json.dumps(
            {
                "measured_at": started.isoformat(timespec="seconds"),
                "options": vars(options) | {"output": str(output)},
                "git": git_info(),
                "machine": machine_info(),
                "python": sys.version,
                "psycopg": psycopg.__version__,
                "server": server[0] if server else None,
                "claimed_jobs_per_s": samples,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
