"""Workflow steps and the dead-letter queue: a dead-lettered step holds its dependents; a retry
from the DLQ resumes the workflow, a purge fails the step for good and cancels them."""

from __future__ import annotations

import pytest
from django.test import override_settings

import awa_django as awa
from tests.conftest import run_burst
from tests.workflows.jobs import collect, fail_first_run

pytestmark = pytest.mark.usefixtures("awa_db")


@pytest.fixture(autouse=True)
def dlq_queue():
    with override_settings(AWA={"QUEUES": {"default": {"dlq": True}}}):
        yield


def dead_lettered_workflow() -> awa.WorkflowRun:
    run = (
        awa.Workflow("dlq")
        .step("a", fail_first_run)
        .step("b", collect, after=["a"])
        .on_failure("handler", collect)
        .enqueue()
    )
    run_burst()
    state = awa.get_workflow(run.workflow_id)
    assert awa.get_job(run.job_ids["a"]).state == "dlq"
    assert [s.state for s in state.steps] == ["dead_lettered", "held", "held"]
    assert state.state == "running"
    return run


def test_retrying_a_dead_lettered_step_resumes_its_workflow():
    run = dead_lettered_workflow()
    assert awa.dlq.retry(run.job_ids["a"])
    run_burst()
    state = awa.get_workflow(run.workflow_id)
    assert state.state == "completed"
    assert [s.state for s in state.steps] == ["completed", "completed", "skipped"]
    assert state.step("b").result == ["fixed"]


def test_purging_a_dead_lettered_step_fails_it_and_cancels_its_dependents():
    run = dead_lettered_workflow()
    assert awa.dlq.purge(run.job_ids["a"])
    run_burst()
    state = awa.get_workflow(run.workflow_id)
    assert state.state == "failed"
    assert [s.state for s in state.steps] == ["failed", "cancelled", "completed"]
    assert "given up" in state.step("a").error["reason"]
