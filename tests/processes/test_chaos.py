"""Chaos, with real processes on a PostgreSQL cluster of the test's own: worker processes are
SIGKILLed at random while producers enqueue, the server restarts once, and a poison-pill job
sits among the rest. Nothing is lost, no attempt runs twice, every job completes exactly once
but the poison pill, which fails with its reason, and every worker alive at the end is still
serving and stops cleanly."""

from __future__ import annotations

import json
import random
import time

import pytest

from tests.conftest import WorkerSubprocess, wait_until
from tests.processes.chaos_support import (  # noqa: F401 - cluster is a fixture
    OWN_JOBS,
    assert_audit_holds,
    cluster,
    create_runs_table,
    manage,
    query,
    restart,
)
from tests.processes.test_recovery_processes import FAST

JOBS = 400
WORKERS = 3
CHAOS_SECONDS = 25


ENQUEUE = """
import awa_django as awa
from django.db import transaction
from tests.chaos_jobs import chaos_poison, chaos_step
start, count, poison = {start}, {count}, {poison}
with transaction.atomic():
    awa.enqueue_many(chaos_step, [{{"n": n}} for n in range(start, start + count)])
    if poison:
        chaos_poison.enqueue()
"""


@pytest.mark.fault_injection
def test_kills_a_restart_and_a_poison_pill_lose_nothing(cluster):  # noqa: F811 - the fixture
    url = cluster.url
    manage(url, "migrate", "--no-input", "-v", "0")
    create_runs_table(url)
    env = {
        "DATABASE_URL": url,
        "AWA_JOB_MODULES": "tests.chaos_jobs",
        "AWA_OVERRIDES": json.dumps({**FAST, "QUEUES": {"default": {"concurrency": 4}}}),
    }
    rng = random.Random(20261202)
    workers = [WorkerSubprocess("--queue", "default", env=env).wait_ready() for _ in range(WORKERS)]
    try:
        batches = 8
        started = time.monotonic()
        restarted = False
        for batch in range(batches):
            count = JOBS // batches
            code = ENQUEUE.format(start=batch * count, count=count, poison=batch == 3)
            manage(url, "shell", "-c", code)
            time.sleep(CHAOS_SECONDS / batches / 2)
            victim = rng.randrange(len(workers))
            workers[victim].proc.kill()
            workers[victim].wait(10)
            workers[victim] = WorkerSubprocess("--queue", "default", env=env)
            if not restarted and time.monotonic() - started > CHAOS_SECONDS / 3:
                restart(cluster)
                restarted = True
            time.sleep(CHAOS_SECONDS / batches / 2)
        assert restarted
        # A worker started by the last round may still be importing Django when the test
        # ends; a SIGTERM before it installs its handlers ends it with -15, not 0.
        for worker in workers:
            worker.wait_ready(timeout=60)

        def settled() -> bool:
            rows = query(
                url,
                "SELECT count(*) FILTER (WHERE state NOT IN ('completed', 'failed')) "
                f"FROM awa.jobs WHERE {OWN_JOBS}",
            )
            return rows[0][0] == 0

        wait_until(settled, timeout=60)
        assert all(worker.proc.poll() is None for worker in workers), [
            worker.output[-2000:] for worker in workers if worker.proc.poll() is not None
        ]
    finally:
        for worker in workers:
            if worker.proc.poll() is None:
                worker.proc.terminate()
        try:
            codes = [worker.wait(30) for worker in workers]
        finally:
            for worker in workers:
                worker.kill()
    assert codes == [0] * WORKERS

    states = dict(
        query(url, f"SELECT state, count(*) FROM awa.jobs WHERE {OWN_JOBS} GROUP BY state")
    )
    assert states == {"completed": JOBS, "failed": 1}
    # Exactly one completed attempt per job; no attempt ran twice (a run belongs to one lease).
    done = query(
        url,
        "SELECT job_id, count(*) FROM awa.done_entries WHERE outcome = 'completed' "
        "GROUP BY job_id HAVING count(*) <> 1",
    )
    assert done == []
    twice = query(
        url,
        "SELECT job_id, run_lease FROM tests_job_runs GROUP BY job_id, run_lease "
        "HAVING count(*) > 1",
    )
    assert twice == []
    (poison,) = query(url, "SELECT attempt, errors FROM awa.jobs WHERE kind = 'tests.chaos_poison'")
    assert poison[0] == 2
    assert all("poison pill" in error["message"] for error in poison[1])
    # And the operator's audit finds every invariant held (docs/operations.md).
    assert_audit_holds(url)
