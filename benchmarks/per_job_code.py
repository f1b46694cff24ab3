"""CPU per job of the worker's per-job value code, without a database: building a claimed job
from its row, its attempt's ``JobContext`` (the worker's constructor, and the public one for
comparison), its ``Completion``, and the close statement's parameters for a batch of 128.

Usage::

    python -m benchmarks.per_job_code [--batches 2000] [--repeat 5]

Prints the best of ``--repeat`` runs of ``--batches`` batches, in µs per job. The example
project's settings are used because the code reads awa's settings.
"""

from __future__ import annotations

import argparse
import os
import timeit
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import django

BATCH = 128


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    django.setup()

    from awa_django.core.claimed_job import CLAIMED_JOB_COLUMNS, claimed_job_rows
    from awa_django.core.completion import Completion
    from awa_django.core.outcome import Outcome
    from awa_django.declarations.jobs import AttemptProgress, JobContext
    from awa_django.storage.execution import close_params
    from awa_django.worker.executor import context_for

    def public_context(job: Any) -> JobContext:
        # What context_for built before the worker had a constructor of its own (#32).
        return JobContext(
            job_id=job.job_id, kind=job.kind, queue=job.queue, priority=job.priority,
            attempt=job.attempt, max_attempts=job.max_attempts, run_lease=job.run_lease,
            args=job.args, metadata=job.metadata, tags=tuple(job.tags), created_at=job.created_at,
            claimed_by="worker", claimed_at=job.claimed_at,
            state=AttemptProgress(job.progress, job.checkpoint),
        )  # fmt: skip

    now = datetime.now(UTC)
    values = ("default", 2, 0, 1, 0, 1, "k", {}, 1, 1, 25, now, now, {}, [], [], None, None)
    make = claimed_job_rows(CLAIMED_JOB_COLUMNS)
    jobs = [make(values) for _ in range(BATCH)]
    completions = [Completion.of(job, Outcome.COMPLETED) for job in jobs]
    cases: dict[str, Callable[[], Any]] = {
        "claimed job from its row": lambda: [make(values) for _ in range(BATCH)],
        "context_for": lambda: [context_for(job, claimed_by="worker") for job in jobs],
        "public JobContext(...)": lambda: [public_context(job) for job in jobs],
        "Completion.of": lambda: [Completion.of(job, Outcome.COMPLETED) for job in jobs],
        "close statement parameters": lambda: close_params(completions),
    }
    for name, case in cases.items():
        runs = timeit.repeat(case, number=args.batches, repeat=args.repeat)
        print(f"{name:28s} {min(runs) / args.batches / BATCH * 1e6:.3f} µs per job")


if __name__ == "__main__":
    main()
