"""Workflows run in-process (``run_jobs`` in a TestCase): release order, results passed on,
the failure rules, cancel, validation before any write."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import TestCase

import awa_django as awa
from awa_django.exceptions import InvalidJob
from awa_django.testing import run_jobs
from tests.workflows.jobs import add, collect, errors, fail, returns_a_set


def notes() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT note FROM tests_job_runs ORDER BY id")
        return [note for (note,) in cursor.fetchall()]


def count_rows(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM awa.{table}")
        return int(cursor.fetchone()[0])


class WorkflowsInProcess(TestCase):
    def test_a_chain_passes_each_result_on_and_completes(self):
        run = awa.chain(awa.call(add, x=1), awa.call(add, x=2), awa.call(add, x=3)).enqueue()
        # Only the first step is runnable; the others wait, held.
        assert awa.get_job(run.job_ids["1"]).state == "available"
        assert awa.get_job(run.job_ids["2"]).state == "held"
        run_jobs()
        state = awa.get_workflow(run.workflow_id)
        assert state.state == "completed"
        assert state.results == {"1": 1, "2": 3, "3": 6}
        assert notes() == ["1", "2", "3"]
        assert state.counts == {"completed": 3}

    def test_a_chord_callback_reads_the_group_results_in_order(self):
        run = awa.chord([awa.call(add, x=n) for n in (5, 6, 7)], awa.call(collect)).enqueue()
        run_jobs()
        state = awa.get_workflow(run.workflow_id)
        assert state.state == "completed"
        assert state.step("callback").result == [5, 6, 7]
        assert notes().count("callback") == 1

    def test_a_failure_cancels_dependents_and_records_which_step_and_why(self):
        workflow = (
            awa.Workflow("broken")
            .step("a", fail)
            .step("b", add, args={"x": 1}, after=["a"])
            .step("c", add, args={"x": 1}, after=["b"])
            .step("d", add, args={"x": 1})
        )
        run = workflow.enqueue()
        run_jobs()
        state = awa.get_workflow(run.workflow_id)
        assert state.state == "failed"
        assert {s.name: s.state for s in state.steps} == {
            "a": "failed",
            "b": "cancelled",
            "c": "cancelled",
            "d": "completed",
        }
        assert state.step("b").error["dependency"] == "a"
        assert state.step("c").error["dependency"] == "b"
        assert awa.get_job(run.job_ids["c"]).state == "cancelled"
        assert sorted(notes()) == ["a", "d"]

    def test_ignore_lets_a_dependent_run_with_the_error_visible(self):
        run = awa.Workflow().step("a", fail).step("b", errors, after=["a"], ignore=["a"]).enqueue()
        run_jobs()
        state = awa.get_workflow(run.workflow_id)
        assert state.step("b").state == "completed"
        assert state.step("b").result == {"a": "step broke"}
        assert state.state == "failed"

    def test_on_failure_runs_once_with_the_errors_and_not_when_all_succeed(self):
        failing = (
            awa.Workflow()
            .step("a", fail)
            .step("b", fail)
            .step("c", add, args={"x": 1}, after=["a"])
            .on_failure("handler", errors)
            .enqueue()
        )
        fine = awa.Workflow().step("a", add, args={"x": 1}).on_failure("handler", errors).enqueue()
        run_jobs()
        state = awa.get_workflow(failing.workflow_id)
        assert state.state == "failed"
        assert state.step("handler").state == "completed"
        assert set(state.step("handler").result) == {"a", "b", "c"}
        assert notes().count("handler") == 1
        ok = awa.get_workflow(fine.workflow_id)
        assert ok.state == "completed" and ok.step("handler").state == "skipped"

    def test_cancel_workflow_cancels_every_unfinished_step_and_ends_cancelled(self):
        run = (
            awa.Workflow()
            .step("a", add, args={"x": 1})
            .step("b", add, args={"x": 1}, after=["a"])
            .on_failure("handler", errors)
            .enqueue()
        )
        assert awa.cancel_workflow(run.workflow_id, reason="changed my mind") == 2
        assert run_jobs().completed == 0
        state = awa.get_workflow(run.workflow_id)
        assert state.state == "cancelled"
        assert {s.name: s.state for s in state.steps} == {
            "a": "cancelled",
            "b": "cancelled",
            "handler": "skipped",
        }
        assert awa.cancel_workflow(run.workflow_id) is None

    def test_cancelling_one_held_step_cancels_its_dependents(self):
        run = awa.chain(awa.call(add, x=1), awa.call(add, x=2), awa.call(add, x=3)).enqueue()
        assert awa.cancel(run.job_ids["2"])
        run_jobs()
        state = awa.get_workflow(run.workflow_id)
        assert [s.state for s in state.steps] == ["completed", "cancelled", "cancelled"]
        assert state.state == "failed"

    def test_bad_workflows_are_refused_before_anything_is_written(self):
        cases = {
            "steps.b.after": awa.Workflow()
            .step("a", add, args={"x": 1})
            .step("b", add, args={"x": 1}, after=["nope"]),
            "steps.a.after": awa.Workflow()
            .step("a", add, args={"x": 1}, after=["b"])
            .step("b", add, args={"x": 1}, after=["a"]),
            "steps.a": awa.Workflow().step("a", add, args={"x": 1}).step("a", collect),
            "steps.a.args.y": awa.Workflow().step("a", add, args={"x": 1, "y": 2}),
            "steps.b.ignore": awa.Workflow().step("a", collect).step("b", collect, ignore=["a"]),
        }
        for field, workflow in cases.items():
            with pytest.raises(InvalidJob) as refused:
                workflow.enqueue()
            assert refused.value.field is not None
            assert refused.value.field.startswith(field), (field, refused.value.field)
            assert str(refused.value).startswith(field)
        assert count_rows("workflows") == 0 and count_rows("deferred_jobs") == 0

    def test_a_result_that_is_not_json_fails_its_step_and_cancels_the_dependents(self):
        run = awa.Workflow().step("a", returns_a_set).step("b", collect, after=["a"]).enqueue()
        run_jobs()
        state = awa.get_workflow(run.workflow_id)
        assert state.state == "failed"
        assert state.step("a").state == "failed"
        assert state.step("a").error["type"] == "awa_django.exceptions.InvalidReturnValue"
        assert state.step("b").error["dependency"] == "a"

    def test_a_django_task_is_a_step_and_passes_its_result_on(self):
        from tests.tasks.tasks import add as add_task

        run = (
            awa.Workflow()
            .step("sum", add_task, args={"a": 2, "b": 3})
            .step("c", collect, after=["sum"])
            .enqueue()
        )
        run_jobs()
        state = awa.get_workflow(run.workflow_id)
        assert state.state == "completed", state
        assert state.step("sum").result == 5
        assert state.step("c").result == [5]

    def test_a_django_task_step_is_refused_with_its_field(self):
        from tests.tasks.tasks import add as add_task

        with pytest.raises(InvalidJob) as refused:
            awa.Workflow().step("sum", add_task, args={"a": 2, "b": {3}}).enqueue()
        assert refused.value.field == "steps.sum.args.b", refused.value.field

    def test_a_step_fans_out_at_run_time_and_the_fan_in_waits_for_every_added_step(self):
        from tests.workflows.jobs import split

        run = (
            awa.Workflow("fan")
            .step("split", split, args={"parts": 3})
            .step("combine", collect, after=["split"])
            .enqueue()
        )
        run_jobs()
        state = awa.get_workflow(run.workflow_id)
        assert state.state == "completed", state
        assert [s.name for s in state.steps] == [
            "split",
            "combine",
            "split/part-1",
            "split/part-2",
            "split/part-3",
        ]
        # part-3 waited for part-1 too; each part adds its x to split's result (0).
        assert state.step("split/part-3").after == ("split", "split/part-1")
        assert state.step("combine").result == [0, 10, 20, 30]
        assert notes().index("combine") > notes().index("split/part-3")

    def test_steps_added_by_an_attempt_that_fails_are_never_written(self):
        from tests.workflows.jobs import split

        run = awa.Workflow().step("split", split, args={"parts": -2}).enqueue()
        run_jobs()
        state = awa.get_workflow(run.workflow_id)
        assert [s.name for s in state.steps] == ["split"] and state.state == "failed"

    def test_names_with_the_separator_are_refused(self):
        with pytest.raises(InvalidJob) as refused:
            awa.Workflow().step("a/b", collect).enqueue()
        assert refused.value.field == "steps.a/b"
