"""Retrying a step that failed for good resumes its workflow: the step runs again, the steps
cancelled because of it wait again (only those), and the workflow ends terminal again."""

from __future__ import annotations

import time

import pytest
from django.db import connection

import awa_django as awa
from tests.conftest import run_burst
from tests.workflows.jobs import collect, errors, fail, fail_first_run

pytestmark = pytest.mark.usefixtures("awa_db")

WORKER_ENV = {"AWA_JOB_MODULES": "tests.jobs,tests.workflows.jobs"}


def runs(note: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM tests_job_runs WHERE note = %s", [note])
        (count,) = cursor.fetchone()
    return int(count)


def states(run: awa.WorkflowRun) -> dict[str, str]:
    state = awa.get_workflow(run.workflow_id)
    assert state is not None
    return {s.name: s.state for s in state.steps}


def failed_chain() -> awa.WorkflowRun:
    run = (
        awa.Workflow("retry")
        .step("a", fail_first_run)
        .step("b", collect, after=["a"])
        .step("c", collect, after=["b"])
        .on_failure("handler", errors)
        .enqueue()
    )
    run_burst()
    state = awa.get_workflow(run.workflow_id)
    assert state is not None and state.state == "failed"
    assert states(run) == {
        "a": "failed",
        "b": "cancelled",
        "c": "cancelled",
        "handler": "completed",
    }
    return run


def test_retrying_a_failed_step_resumes_its_workflow_with_a_real_worker(worker_process):
    run = failed_chain()
    assert awa.retry_workflow_step(run.workflow_id, "a")
    state = awa.get_workflow(run.workflow_id)
    assert state is not None
    assert state.state == "running" and state.workflow.finished_at is None
    assert states(run) == {"a": "released", "b": "held", "c": "held", "handler": "completed"}
    assert awa.get_job(run.job_ids["b"]).state == "held"

    worker_process(env=WORKER_ENV).wait_ready()
    state = awa.wait_workflow(run.workflow_id, timeout=30)
    assert state.state == "completed"
    assert states(run) == {
        "a": "completed",
        "b": "completed",
        "c": "completed",
        "handler": "completed",  # it ran once, for the first failure, and is kept
    }
    assert state.step("b").result == ["fixed"]
    assert state.step("c").result == [["fixed"]]
    assert (runs("a"), runs("b"), runs("c"), runs("handler")) == (2, 1, 1, 1)
    assert (state.workflow.unfinished, state.workflow.failures) == (0, 0)


def test_awa_retry_of_the_steps_job_resumes_it_too():
    run = failed_chain()
    assert awa.retry(run.job_ids["a"])
    run_burst()
    state = awa.wait_workflow(run.workflow_id, timeout=10)
    assert state.state == "completed"
    assert states(run)["c"] == "completed"


def test_only_the_steps_cancelled_because_of_it_wait_again():
    run = (
        awa.Workflow("two branches")
        .step("a", fail_first_run)
        .step("a2", collect, after=["a"])
        .step("x", fail)
        .step("x2", collect, after=["x"])
        .step("ax", collect, after=["a2", "x"])
        .step("tolerant", errors, after=["a"], ignore=["a"])
        .enqueue()
    )
    run_burst()
    assert states(run)["a2"] == "cancelled" and states(run)["x2"] == "cancelled"
    assert runs("tolerant") == 1

    assert awa.retry_workflow_step(run.workflow_id, "a")
    after = states(run)
    assert after["a2"] == "held"
    assert after["x2"] == "cancelled"  # cancelled because of x, not a
    assert after["ax"] == "cancelled"  # x failed: it would be cancelled anyway
    run_burst()
    state = awa.wait_workflow(run.workflow_id, timeout=10)
    assert state.state == "failed"  # x still failed
    assert states(run) == {
        "a": "completed",
        "a2": "completed",
        "x": "failed",
        "x2": "cancelled",
        "ax": "cancelled",
        "tolerant": "completed",
    }
    assert runs("tolerant") == 1  # it ran with a's error and keeps that run
    assert state.workflow.failures == 3 and state.workflow.unfinished == 0


def test_a_held_step_ignoring_the_failure_waits_for_the_retried_step():
    run = (
        awa.Workflow("ignore")
        .step("a", fail_first_run)
        .step("gate", collect, queue="email")
        .step("join", collect, after=["a", "gate"], ignore=["a"])
        .enqueue()
    )
    run_burst(queues={"default": 1})  # a fails; gate waits in its queue
    assert states(run) == {"a": "failed", "gate": "released", "join": "held"}
    assert awa.retry_workflow_step(run.workflow_id, "a")
    run_burst(queues={"default": 1})  # a completes: join still waits for gate
    assert states(run) == {"a": "completed", "gate": "released", "join": "held"}
    run_burst(queues={"email": 1})
    run_burst(queues={"default": 1})
    state = awa.wait_workflow(run.workflow_id, timeout=10)
    assert state.state == "completed"
    assert state.step("join").result == ["fixed", []]
    assert runs("join") == 1


def test_refusals():
    run = failed_chain()
    assert not awa.retry_workflow_step(run.workflow_id, "b")  # cancelled, not failed
    assert not awa.retry_workflow_step(run.workflow_id, "handler")
    assert not awa.retry_workflow_step(run.workflow_id, "nope")
    assert not awa.retry_workflow_step(999_999, "a")
    ok = awa.chain(awa.call(collect)).enqueue()
    run_burst()
    assert not awa.retry_workflow_step(ok.workflow_id, "1")  # completed

    held = awa.Workflow().step("f", fail).step("g", collect, after=["f"])
    cancelled = held.step("h", collect, after=["g"]).enqueue()
    assert awa.cancel_workflow(cancelled.workflow_id) == 3
    assert not awa.retry_workflow_step(cancelled.workflow_id, "f")


def test_the_workflow_waits_for_a_retried_step_while_its_on_failure_step_runs():
    """The retry lands while the on_failure step is still running: the workflow is finished
    by the retried step's end, not by the on_failure step's."""
    run = (
        awa.Workflow("late retry")
        .step("a", fail_first_run)
        .on_failure("handler", collect)
        .enqueue()
    )
    run_burst(queues={"default": 1})
    state = awa.get_workflow(run.workflow_id)
    assert state is not None and state.state == "failed"
    # Rewind the handler to released, as if it were still running when the retry came.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE awa.workflow_steps SET state = 'released' WHERE job_id = %s",
            [run.job_ids["handler"]],
        )
        cursor.execute(
            "UPDATE awa.workflows SET state = 'running', finished_at = NULL WHERE workflow_id = %s",
            [run.workflow_id],
        )
    assert awa.retry_workflow_step(run.workflow_id, "a")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT awa.workflow_steps_ended(%s::jsonb)",
            [f'[{{"job_id": {run.job_ids["handler"]}, "outcome": "completed"}}]'],
        )
    assert awa.get_workflow(run.workflow_id).state == "running"
    run_burst()
    deadline = time.monotonic() + 10
    while awa.get_workflow(run.workflow_id).state == "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert awa.get_workflow(run.workflow_id).state == "completed"
