"""The producer's Python per job, counted (#32): a bound on the calls one ``enqueue`` makes, in
autocommit and inside ``transaction.atomic()`` (the web-shaped request), and on those
``enqueue_many`` makes per job of a batch of 1,000 plain argument dicts, the shape of the bulk
benchmark. Calls, not time, so the count does not depend on the machine's load."""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Callable

import pytest
from django.db import transaction

import awa_django as awa
from tests.jobs import noop, typed

pytestmark = pytest.mark.usefixtures("awa_db", "no_telemetry_sdk")

JOBS = 1_000
# About 12.5 calls a job on Python 3.11 (its generator steps, the plain-dict check, one
# encode, the row's COPY field); 34.5 before the batch's short path (#32), which bound each
# dict through the single enqueue's checks (the Mapping check, the signature, one _matches
# per argument), and a list append and length test per COPY line. A change that adds calls to
# every job of a batch fails here.
MAX_CALLS_PER_JOB = 15


ENQUEUES = 100
ARGS = {"n": 0}
# A single enqueue, in autocommit and in atomic() (the block's own enter, commit and exit
# included), a little above what cProfile counts on Python 3.11 (docs/benchmarks.md, "One
# enqueue, counted"): below what it made through a Django cursor (its creation, wrappers and a
# psycopg cursor per statement), so a change that brings one back to every enqueue fails here.
MAX_CALLS_PER_ENQUEUE = {"autocommit": 160, "atomic": 295}


def calls(action: Callable[[], object], times: int) -> float:
    """The Python calls (cProfile's count, the builtins' included) ``action`` makes, on
    average over ``times`` runs."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(times):
        action()
    profile.disable()
    stats: dict[object, tuple[int, int, float, float, object]] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    return sum(entry[1] for entry in stats.values()) / times


def in_autocommit() -> int:
    return noop.enqueue(**ARGS)


def in_atomic() -> int:
    with transaction.atomic():
        return noop.enqueue(**ARGS)


@pytest.mark.parametrize("mode", ["autocommit", "atomic"])
def test_an_enqueue_costs_a_bounded_number_of_python_calls(mode):
    enqueue = in_autocommit if mode == "autocommit" else in_atomic
    enqueue()  # the lane, the connection, the session's first statements
    per_enqueue = calls(enqueue, ENQUEUES)
    assert 0 < per_enqueue <= MAX_CALLS_PER_ENQUEUE[mode], per_enqueue
    assert awa.get_job(enqueue()) is not None


def test_a_bulk_enqueue_costs_a_bounded_number_of_python_calls_per_job():
    args_list = [{"user_id": n, "email": f"user{n}@example.com"} for n in range(JOBS)]
    typed.enqueue_many(args_list[:10])  # the lane, the session's first statements
    job_ids: list[int] = []
    per_job = calls(lambda: job_ids.extend(typed.enqueue_many(args_list)), 1) / JOBS
    assert len(job_ids) == JOBS
    assert 0 < per_job <= MAX_CALLS_PER_JOB, per_job
    assert [job.args for job in awa.get_jobs(job_ids[-2:])] == args_list[-2:]
