"""Held steps are visible to operators: a ``held`` state filter in ``awa.list_jobs``,
``awa_jobs list`` and the admin's job list, each saying which steps a held step waits for."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse

import awa_django as awa
from awa_django.producer.workflows import waiting_on
from tests.admin.conftest import operator_client  # noqa: F401
from tests.conftest import run_burst
from tests.workflows.jobs import add, collect, fail_first_run

pytestmark = pytest.mark.usefixtures("awa_db")

JOBS = "admin:awa_django_job_changelist"


def held_workflow() -> awa.WorkflowRun:
    # "gate" waits in a queue no burst below serves, so "join" keeps waiting on it.
    return (
        awa.chord([awa.call(add, x=n) for n in range(7)], awa.call(collect), name="wide")
        .step("gate", collect, queue="email")
        .step("join", collect, after=["callback", "gate"])
        .on_failure("handler", collect)
        .enqueue()
    )


def test_held_steps_are_listed_with_what_they_wait_for():
    run = held_workflow()
    plain = awa.enqueue(add, args={"x": 1}, queue="partners")
    held = {job.job_id for job in awa.list_jobs(state="held", limit=100)}
    assert held == {run.job_ids[s] for s in ("callback", "join", "handler")}
    assert plain not in held

    waits = waiting_on([*held, plain])
    assert str(waits[run.job_ids["callback"]]) == "waiting on 1, 2, 3, 4, 5 and 2 more"
    assert str(waits[run.job_ids["join"]]) == "waiting on callback, gate"
    assert waits[run.job_ids["handler"]].count == 10  # every other step that has not ended
    assert plain not in waits

    run_burst(queues={"default": 2})  # the members, then the callback
    waits = waiting_on([run.job_ids["join"], run.job_ids["handler"]])
    assert str(waits[run.job_ids["join"]]) == "waiting on gate"
    assert str(waits[run.job_ids["handler"]]) == "waiting on gate, join"


def test_a_dead_lettered_dependency_is_waited_on():
    with override_settings(AWA={"QUEUES": {"default": {"dlq": True}}}):
        run = awa.Workflow().step("a", fail_first_run).step("b", collect, after=["a"]).enqueue()
        run_burst()
        assert str(waiting_on([run.job_ids["b"]])[run.job_ids["b"]]) == ("waiting on a")


def test_awa_jobs_list_held():
    run = held_workflow()
    out = StringIO()
    call_command("awa_jobs", "list", "--state", "held", stdout=out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 4  # the header and three held steps
    join = next(line for line in lines if line.startswith(str(run.job_ids["join"])))
    assert "held (waiting on callback, gate)" in join


def test_admin_job_list_filters_held_and_says_what_they_wait_for(operator_client):  # noqa: F811
    run = held_workflow()
    page = operator_client.get(reverse(JOBS), {"state": "held"}).content.decode()
    assert page.count('class="awa-badge held waiting-on"') == 3
    assert "waiting on callback, gate" in page
    assert "waiting on 1, 2, 3, 4, 5 and 2 more" in page
    # Any-state listing says it too; the members themselves are not held.
    page = operator_client.get(reverse(JOBS)).content.decode()
    assert page.count('class="awa-badge held waiting-on"') == 3
    assert str(run.job_ids["1"]) in page
