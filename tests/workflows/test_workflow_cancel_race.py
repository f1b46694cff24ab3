"""cancel_workflow racing worker processes that close, and release, steps of the same workflow:
both take their locks in one order (an attempt's closure, then the workflow's lock), so no
deadlock is ever detected, every cancel returns, and every workflow ends."""

from __future__ import annotations

import random
import threading
import time

import pytest
from django.db import connection, connections

import awa_django as awa
from tests.workflows.jobs import add

WORKER_ENV = {"AWA_JOB_MODULES": "tests.jobs,tests.workflows.jobs"}


def deadlocks() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        (count,) = cursor.fetchone()
    return int(count)


@pytest.mark.fault_injection
def test_cancel_racing_closes_and_releases_never_deadlocks(worker_process):
    workers = [worker_process(env=WORKER_ENV) for _ in range(3)]
    for worker in workers:
        worker.wait_ready()
    before = deadlocks()
    rng = random.Random(34)
    errors: list[BaseException] = []
    runs: list[awa.WorkflowRun] = []
    cancelled: list[int] = []

    def cancel_some(mine: list[awa.WorkflowRun]) -> None:
        try:
            for run in mine:
                # While its steps close and release the next ones in three workers.
                time.sleep(rng.uniform(0.0, 0.05))
                if awa.cancel_workflow(run.workflow_id, reason="race") is not None:
                    cancelled.append(run.workflow_id)
        except BaseException as exc:  # a deadlock would surface here
            errors.append(exc)
        finally:
            connections.close_all()

    deadline = time.monotonic() + 30
    rounds = 0
    while time.monotonic() < deadline:
        rounds += 1
        # Chains of fast steps (each close releases the next step) and wide groups (one
        # close batch holds several steps of one workflow).
        batch = [
            awa.chain(*(awa.call(add, x=1) for _ in range(12)), name="chain").enqueue()
            for _ in range(6)
        ] + [awa.group(*(awa.call(add, x=1) for _ in range(12)), name="group").enqueue()]
        runs += batch
        time.sleep(rng.uniform(0.0, 0.03))
        threads = [threading.Thread(target=cancel_some, args=(batch[i::2],)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == [], errors
    for run in runs:
        state = awa.wait_workflow(run.workflow_id, timeout=30)
        if run.workflow_id in cancelled:
            assert state.state == "cancelled", state
            assert set(state.counts) <= {"completed", "cancelled"}, state.counts
        else:
            assert state.state == "completed", state
    assert deadlocks() == before, f"{deadlocks() - before} deadlocks in {rounds} rounds"
    assert cancelled, "no cancel landed while the workflow ran"
    for worker in workers:
        assert "deadlock" not in worker.output
        worker.kill()
