"""Workflows under chaos, with real processes on a PostgreSQL cluster of the test's own: 200
workflows mixing chains, groups and chords while worker processes are SIGKILLed at random and
the server restarts once. Every workflow ends completed, every step completed exactly once and
was released exactly once (every fan-in included), and no attempt ran twice."""

from __future__ import annotations

import json
import random
import time

import pytest

from tests.conftest import WorkerSubprocess, wait_until
from tests.processes.chaos_support import (  # noqa: F401 - cluster is a fixture
    cluster,
    create_runs_table,
    manage,
    query,
    restart,
)
from tests.processes.test_recovery_processes import FAST

WORKFLOWS = 200
WORKERS = 3
CHAOS_SECONDS = 25
MODULES = "tests.chaos_jobs,tests.workflows.jobs"

ENQUEUE = """
import awa_django as awa
from django.db import transaction
from tests.workflows.jobs import collect, sleep
start, count = {start}, {count}
with transaction.atomic():
    for n in range(start, start + count):
        members = [awa.call(sleep) for _ in range(3)]
        if n % 3 == 0:
            awa.chain(*members, awa.call(collect), name="chain").enqueue()
        elif n % 3 == 1:
            awa.group(*members, name="group").enqueue()
        else:
            awa.chord(members, awa.call(collect), name="chord").enqueue()
"""


@pytest.mark.fault_injection
def test_workflows_survive_kills_and_a_restart(cluster):  # noqa: F811 - the fixture
    url = cluster.url
    manage(url, "migrate", "--no-input", "-v", "0")
    create_runs_table(url)
    env = {
        "DATABASE_URL": url,
        "AWA_JOB_MODULES": MODULES,
        "AWA_OVERRIDES": json.dumps({**FAST, "QUEUES": {"default": {"concurrency": 4}}}),
    }
    rng = random.Random(20261204)
    workers = [WorkerSubprocess("--queue", "default", env=env).wait_ready() for _ in range(WORKERS)]
    try:
        batches = 8
        started = time.monotonic()
        restarted = False
        for batch in range(batches):
            count = WORKFLOWS // batches
            code = ENQUEUE.format(start=batch * count, count=count)
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

        def settled() -> bool:
            rows = query(url, "SELECT count(*) FROM awa.workflows WHERE state = 'running'")
            return rows[0][0] == 0

        wait_until(settled, timeout=60)
    finally:
        for worker in workers:
            worker.kill()

    states = dict(query(url, "SELECT state, count(*) FROM awa.workflows GROUP BY state"))
    assert states == {"completed": WORKFLOWS}
    steps = dict(query(url, "SELECT state, count(*) FROM awa.workflow_steps GROUP BY state"))
    # A chain and a chord have 4 steps, a group 3.
    assert steps == {"completed": sum(3 if n % 3 == 1 else 4 for n in range(WORKFLOWS))}
    # Released once: each step's job has one ready row of lease 0 (a retry's rows come later).
    assert (
        query(
            url,
            "SELECT job_id FROM awa.ready_entries WHERE run_lease = 0 GROUP BY job_id "
            "HAVING count(*) <> 1",
        )
        == []
    )
    # Completed once, and no attempt ran twice.
    assert (
        query(
            url,
            "SELECT job_id FROM awa.done_entries WHERE outcome = 'completed' GROUP BY job_id "
            "HAVING count(*) <> 1",
        )
        == []
    )
    assert (
        query(
            url,
            "SELECT job_id, run_lease FROM tests_job_runs GROUP BY job_id, run_lease "
            "HAVING count(*) > 1",
        )
        == []
    )
    # Every fan-in read its dependencies' results, in order.
    wrong = query(
        url,
        "SELECT s.workflow_id FROM awa.workflow_steps s WHERE s.after <> '{}' "
        "AND s.result IS DISTINCT FROM (SELECT jsonb_agg(p.result ORDER BY p.position) "
        "FROM awa.workflow_steps p WHERE p.workflow_id = s.workflow_id "
        "AND p.name = ANY (s.after)) AND cardinality(s.after) > 1",
    )
    assert wrong == []
