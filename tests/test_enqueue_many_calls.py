"""The producer's Python per job of a bulk enqueue, counted (#32): a bound on the calls
``enqueue_many`` makes for a batch of 1,000 plain argument dicts, the shape of the bulk
benchmark. Calls, not time, so the count does not depend on the machine's load."""

from __future__ import annotations

import cProfile
import pstats

import pytest

import awa_django as awa
from tests.jobs import typed

pytestmark = pytest.mark.usefixtures("awa_db")

JOBS = 1_000
# About 12.5 calls a job on Python 3.11 (its generator steps, the plain-dict check, one
# encode, the row's COPY field); 34.5 before the batch's short path (#32), which bound each
# dict through the single enqueue's checks (the Mapping check, the signature, one _matches
# per argument), and a list append and length test per COPY line. A change that adds calls to
# every job of a batch fails here.
MAX_CALLS_PER_JOB = 15


def test_a_bulk_enqueue_costs_a_bounded_number_of_python_calls_per_job():
    args_list = [{"user_id": n, "email": f"user{n}@example.com"} for n in range(JOBS)]
    typed.enqueue_many(args_list[:10])  # the lane, the session's first statements
    profile = cProfile.Profile()
    profile.enable()
    job_ids = typed.enqueue_many(args_list)
    profile.disable()
    assert len(job_ids) == JOBS
    stats: dict[object, tuple[int, int, float, float, object]] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    per_job = sum(entry[1] for entry in stats.values()) / JOBS
    assert 0 < per_job <= MAX_CALLS_PER_JOB, per_job
    assert [job.args for job in awa.get_jobs(job_ids[-2:])] == args_list[-2:]
