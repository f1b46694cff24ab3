"""Eager mode runs a workflow's steps in-process once it commits, wave after wave."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.db import transaction
from django.test import override_settings

import awa_django as awa
from tests.workflows.jobs import add, collect, fail

pytestmark = pytest.mark.usefixtures("awa_db")


@pytest.fixture(autouse=True)
def eager() -> Iterator[None]:
    with override_settings(AWA={**settings.AWA, "EAGER": True}):
        yield


def test_a_committed_workflow_runs_to_the_end_in_process():
    with transaction.atomic():
        run = (
            awa.Workflow()
            .step("a", add, args={"x": 1})
            .step("b", add, args={"x": 2}, after=["a"])
            .step("c", add, args={"x": 3}, after=["a"])
            .step("d", collect, after=["b", "c"])
            .enqueue()
        )
        assert awa.get_workflow(run.workflow_id).state == "running"
    state = awa.get_workflow(run.workflow_id)
    assert state.state == "completed"
    assert state.step("d").result == [3, 4]


def test_a_rolled_back_workflow_leaves_nothing():
    with pytest.raises(RuntimeError), transaction.atomic():
        run = awa.chain(awa.call(add, x=1), awa.call(add, x=2)).enqueue()
        raise RuntimeError("request failed")
    assert awa.get_workflow(run.workflow_id) is None
    assert awa.get_job(run.job_ids["1"]) is None


def test_a_failing_step_cancels_the_rest_in_eager_mode():
    run = awa.chain(awa.call(fail), awa.call(add, x=2)).enqueue()
    state = awa.get_workflow(run.workflow_id)
    assert state.state == "failed"
    assert [s.state for s in state.steps] == ["failed", "cancelled"]


def test_enqueue_on_commit_writes_the_workflow_at_commit():
    with transaction.atomic():
        pending = awa.chain(awa.call(add, x=1), awa.call(add, x=2)).enqueue_on_commit()
        assert pending.run is None
    assert pending.run is not None
    assert awa.get_workflow(pending.run.workflow_id).results == {"1": 1, "2": 3}


def test_steps_added_at_run_time_run_eagerly_too():
    from tests.workflows.jobs import split

    run = (
        awa.Workflow()
        .step("split", split, args={"parts": 2})
        .step("combine", collect, after=["split"])
        .enqueue()
    )
    state = awa.get_workflow(run.workflow_id)
    assert state.state == "completed"
    assert state.step("combine").result == [0, 10, 20]
