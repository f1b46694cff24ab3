"""The ``workflow_finished`` signal: once per workflow, after the commit of the transaction that
ended it, from the closer that ended it (worker processes racing to close the last steps of one
workflow, an in-process worker, cancel_workflow, a single step's cancel)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, transaction

import awa_django as awa
from awa_django.signals import workflow_finished
from tests.conftest import run_burst
from tests.workflows.jobs import collect, fail, fail_first_run, sleep

pytestmark = pytest.mark.usefixtures("awa_db")

WORKER_ENV = {
    "AWA_JOB_MODULES": "tests.jobs,tests.workflows.jobs,tests.workflows.finished_receiver"
}


@pytest.fixture
def received() -> Iterator[list[dict[str, Any]]]:
    got: list[dict[str, Any]] = []

    def receiver(sender: object, **kwargs: Any) -> None:
        # Sent after commit: the workflow reads as finished from another connection's view.
        state = awa.get_workflow(kwargs["workflow_id"])
        got.append({**kwargs, "sender": sender, "committed_state": state.state if state else None})

    workflow_finished.connect(receiver, dispatch_uid="test-received")
    yield got
    workflow_finished.disconnect(dispatch_uid="test-received")


def finished_rows() -> list[tuple[int, str]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT job_id, note FROM tests_job_runs WHERE note LIKE 'finished:%%' ORDER BY id"
        )
        return [(int(job_id), note) for job_id, note in cursor.fetchall()]


def test_sent_once_per_workflow_by_racing_worker_processes(worker_process):
    workers = [worker_process(env=WORKER_ENV) for _ in range(3)]
    for worker in workers:
        worker.wait_ready()
    # Groups whose members all end at the same instant in different workers: each of their
    # closes may be the one that ends the workflow, and exactly one is.
    until = time.time() + 3.0
    groups = [
        awa.group(*(awa.call(sleep, until=until) for _ in range(4)), name=f"g{n}").enqueue()
        for n in range(8)
    ]
    broken = awa.chain(awa.call(fail), awa.call(collect), name="broken").enqueue()
    for run in [*groups, broken]:
        awa.wait_workflow(run.workflow_id, timeout=60)
    deadline = time.monotonic() + 10
    while len(finished_rows()) < 9:
        assert time.monotonic() < deadline, finished_rows()
        time.sleep(0.05)
    time.sleep(0.3)  # a duplicate would have arrived by now
    rows = finished_rows()
    assert sorted(rows) == sorted(
        [(run.workflow_id, f"finished:completed:g{n}") for n, run in enumerate(groups)]
        + [(broken.workflow_id, "finished:failed:broken")]
    )
    for worker in workers:
        worker.kill()


def test_sent_by_an_in_process_worker_and_again_after_a_retry(received):
    run = awa.chain(awa.call(fail_first_run), awa.call(collect), name="again").enqueue()
    assert received == []
    run_burst()
    assert [(r["workflow_id"], r["name"], r["state"], r["committed_state"]) for r in received] == [
        (run.workflow_id, "again", "failed", "failed")
    ]
    assert awa.retry_workflow_step(run.workflow_id, "1")
    run_burst()
    assert [r["state"] for r in received] == ["failed", "completed"]
    assert received[1]["sender"] is awa.Job


def test_sent_on_commit_of_cancel_workflow_and_of_a_steps_cancel(received):
    held = awa.chain(awa.call(collect), awa.call(collect), name="held")
    first = held.enqueue()
    with transaction.atomic():
        assert awa.cancel_workflow(first.workflow_id) == 2
        assert received == []  # not before the commit
    assert [(r["workflow_id"], r["state"], r["committed_state"]) for r in received] == [
        (first.workflow_id, "cancelled", "cancelled")
    ]
    second = held.enqueue()
    with transaction.atomic():
        assert awa.cancel_workflow(second.workflow_id) == 2
        transaction.set_rollback(True)
    assert len(received) == 1  # rolled back: nothing ended, nothing sent
    # Cancelling the first step's job cancels the second with it: the workflow fails.
    assert awa.cancel(second.job_ids["1"])
    assert [(r["workflow_id"], r["state"]) for r in received[1:]] == [
        (second.workflow_id, "failed")
    ]
    assert not awa.cancel(second.job_ids["2"])
    assert len(received) == 2
