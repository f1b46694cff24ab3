"""CPU per job of the worker's per-job value code, without a database: building a claimed job
from its row, its ``Completion``, and the close statement's parameters for a batch of 128.

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
    from awa_django.storage.execution import close_params

    now = datetime.now(UTC)
    values = ("default", 2, 0, 1, 0, 1, "k", {}, 1, 1, 25, now, now, {}, [], [], None, None)
    make = claimed_job_rows(CLAIMED_JOB_COLUMNS)
    jobs = [make(values) for _ in range(BATCH)]
    completions = [Completion.of(job, Outcome.COMPLETED) for job in jobs]
    cases: dict[str, Callable[[], Any]] = {
        "claimed job from its row": lambda: [make(values) for _ in range(BATCH)],
        "Completion.of": lambda: [Completion.of(job, Outcome.COMPLETED) for job in jobs],
        "close statement parameters": lambda: close_params(completions),
    }
    for name, case in cases.items():
        runs = timeit.repeat(case, number=args.batches, repeat=args.repeat)
        print(f"{name:28s} {min(runs) / args.batches / BATCH * 1e6:.3f} µs per job")


if __name__ == "__main__":
    main()
