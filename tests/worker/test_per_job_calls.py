"""The worker's Python per drained job, counted (#32): a bound on the calls that the functions
running once per job make, in a real drain. Calls, not time, so the count does not depend on
the machine's load; the functions that run once per claim or per poll are left out, since how
many of those a drain makes depends on timing."""

from __future__ import annotations

import asyncio
import cProfile
import pstats
import sys
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

import awa_django as awa
from awa_django.conf import get_settings
from awa_django.core.claimed_job import ClaimedJob
from awa_django.declarations.jobs import DeclaredJob, registry
from awa_django.worker.dispatcher import Dispatcher
from awa_django.worker.process import WorkerProcess, config_from_settings
from tests.conftest import run_burst
from tests.jobs import noop, noop_async

pytestmark = pytest.mark.usefixtures("awa_db", "close_orm_thread_connection")

JOBS = 320
# The functions a drained job passes through once each: (file name ending, function name).
PER_JOB = {
    ("worker/dispatcher.py", "_start"),
    ("worker/dispatcher.py", "_run_one"),
    ("worker/executor.py", "context_for"),
    ("worker/executor.py", "execute"),
    ("worker/executor.py", "_returned"),
    ("worker/job_log.py", "finished"),
    ("worker/completer.py", "submit"),
    ("worker/completer.py", "_queue"),
    ("worker/completer.py", "_write"),
    ("core/completion.py", "completed"),
    ("core/completion.py", "result_to_completion"),
    ("core/completion.py", "of"),
    ("declarations/jobs.py", "reads_workflow_inputs"),
    ("declarations/jobs.py", "take_unflushed"),
    ("awa_django/telemetry.py", "job_span"),
    ("awa_django/telemetry.py", "finished"),
    ("worker/dispatcher.py", "release"),
    # The claim's jsonb columns (three a job: arguments, metadata, errors).
    ("storage/connections.py", "load"),
    # Once per claimed or closed batch, each going through the batch's jobs: what they call
    # per job counts, and their few calls per batch add a fraction of a call per job.
    ("awa_django/telemetry.py", "claimed"),
    ("awa_django/telemetry.py", "closed"),
    ("worker/completer.py", "_write"),
    ("core/closed_attempts.py", "report_closed"),
}
# What those functions call per job for an async no-op (the job's task, its context, the
# completion, telemetry, the close's parameters and counts, the claim's jsonb), with no
# OpenTelemetry SDK installed: the bound sits just above today's count, below the count before
# #32's third round of per-job cuts on Python 3.11 (the claimed jsonb read by the JSON scanner
# alone, a success's completion without the time and the progress it does not use, handlers
# looked up once per claimed batch, the batch's counts and signal checks without a call per
# job, the loop looked up once per batch) and below the count before its fourth round (a
# finished job's slot signalling a waiting dispatcher once per wake, one clock read for a
# claimed batch's start), so a change that adds calls to every job fails here. 3.12 runs a
# job's task differently (eager tasks) and counts about two more. The counts are in
# docs/benchmarks.md.
MAX_CALLS_PER_JOB = 30 if sys.version_info < (3, 12) else 32


def per_job_calls(jobs: int) -> float:
    awa.enqueue_many(noop_async.kind, [{"n": n} for n in range(jobs)])
    profile = cProfile.Profile()
    profile.enable()
    summary = run_burst(queues={"default": 32})
    profile.disable()
    assert summary.closed.completed == jobs
    calls = 0
    for _, (_, _, _, _, callers) in pstats.Stats(profile).stats.items():  # type: ignore[attr-defined]
        for (path, _, name), (_, ncalls, _, _) in callers.items():
            if any(path.endswith(end) and name == fn for end, fn in PER_JOB):
                calls += ncalls
    return calls / jobs


# The job log as a fast drain runs it (docs/observability.md): one line per job is a cost
# the operator chose, counted apart from the queue's own.
# With no OpenTelemetry SDK installed, as the bound counts (a job's span and metrics through an
# SDK are the SDK's calls, and tests/observability installs one for the rest of the session).
@override_settings(AWA={**settings.AWA, "JOB_LOG": "summary"})
@pytest.mark.usefixtures("no_telemetry_sdk")
def test_a_drained_no_op_job_costs_a_bounded_number_of_python_calls():
    per_job = per_job_calls(JOBS)
    assert 0 < per_job <= MAX_CALLS_PER_JOB, per_job


def test_a_sync_job_s_handler_is_looked_up_once_per_claimed_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The dispatcher looks each kind of a claimed batch up once, for the batch's jobs and for
    # whether it holds async jobs (their ORM thread's connection check): not once per job.
    lookups: list[str] = []

    def resolve(kind: str) -> DeclaredJob[Any, Any] | None:
        lookups.append(kind)
        return registry.get(kind)

    batches: list[int] = []
    claim = Dispatcher._claim

    async def counted_claim(self: Dispatcher, limit: int) -> list[ClaimedJob]:
        jobs = await claim(self, limit)
        if jobs:
            batches.append(len(jobs))
        return jobs

    monkeypatch.setattr(Dispatcher, "_claim", counted_claim)
    awa.enqueue_many(noop.kind, [{"n": n} for n in range(JOBS)])
    config = config_from_settings(get_settings(), queues={"default": 32}, burst=True)
    summary = asyncio.run(WorkerProcess(config, resolve).run())
    assert summary.closed.completed == JOBS
    assert sum(batches) == JOBS
    assert lookups.count(noop.kind) == len(batches) < JOBS, (lookups.count(noop.kind), batches)
