"""The admin's Workflows page: list with state and name filters and counts, a workflow's steps
by dependency level with states, results and errors, cancel and retry a failed step (in the
admin log)."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

import awa_django as awa
from tests.admin.conftest import operator_client, outsider_client, staff_user  # noqa: F401
from tests.conftest import run_burst
from tests.workflows.jobs import add, collect, fail, fail_first_run

LIST = "admin:awa_django_workflow_changelist"
DETAIL = "admin:awa_django_workflow_change"
CANCEL = "admin:awa_django_workflow_cancel"
RETRY = "admin:awa_django_workflow_retry"


@pytest.fixture
def workflow_viewer(awa_db: None) -> Client:
    client = Client()
    client.force_login(staff_user("wf-viewer", ["view_workflow", "view_job"]))
    return client


def test_list_filters_and_counts(operator_client):  # noqa: F811
    failed = awa.chain(awa.call(fail), awa.call(add, x=1), name="nightly").enqueue()
    run_burst()
    running = awa.chain(awa.call(add, x=1), awa.call(add, x=2), name="import").enqueue()
    page = operator_client.get(reverse(LIST)).content.decode()
    assert f'id="workflow-{failed.workflow_id}"' in page
    assert f'id="workflow-{running.workflow_id}"' in page
    only = operator_client.get(reverse(LIST), {"state": "running"}).content.decode()
    assert f'id="workflow-{failed.workflow_id}"' not in only
    assert f'id="workflow-{running.workflow_id}"' in only
    named = operator_client.get(reverse(LIST), {"name": "nightly"}).content.decode()
    assert f'id="workflow-{running.workflow_id}"' not in named
    assert operator_client.get(reverse(LIST), {"state": "bogus"}).status_code == 200


def test_detail_draws_the_levels_with_results_and_errors(operator_client):  # noqa: F811
    run = (
        awa.Workflow("shape")
        .step("a", add, args={"x": 1})
        .step("b", add, args={"x": 2}, after=["a"])
        .step("c", fail, after=["a"])
        .step("d", collect, after=["b", "c"])
        .enqueue()
    )
    run_burst()
    page = operator_client.get(reverse(DETAIL, args=[run.workflow_id])).content.decode()
    assert 'id="workflow-state">failed<' in page
    assert page.index('id="graph-a"') < page.index('id="graph-b"') < page.index('id="graph-d"')
    assert "dependency c failed" in page and "step broke" in page
    assert 'id="cancel-workflow"' not in page  # finished
    missing = operator_client.get(reverse(DETAIL, args=[999999]))
    assert missing.status_code == 302


def test_cancel_is_logged_and_needs_change_permission(operator_client, workflow_viewer):  # noqa: F811
    run = awa.chain(awa.call(add, x=1), awa.call(add, x=2)).enqueue()
    page = workflow_viewer.get(reverse(DETAIL, args=[run.workflow_id])).content.decode()
    assert 'id="cancel-workflow"' not in page
    assert workflow_viewer.post(reverse(CANCEL, args=[run.workflow_id])).status_code == 403
    assert (
        'id="cancel-workflow"'
        in operator_client.get(reverse(DETAIL, args=[run.workflow_id])).content.decode()
    )
    response = operator_client.post(reverse(CANCEL, args=[run.workflow_id]))
    assert response.status_code == 302
    assert awa.get_workflow(run.workflow_id).state == "cancelled"
    entry = LogEntry.objects.get(object_id=str(run.workflow_id))
    assert entry.user == User.objects.get(username="operator")
    assert "Cancelled the workflow (2 steps)" in entry.change_message


def test_retry_of_a_failed_step_is_logged_and_needs_change_permission(
    operator_client,  # noqa: F811
    workflow_viewer,
):
    run = awa.chain(awa.call(fail_first_run), awa.call(collect)).enqueue()
    run_burst()
    assert awa.get_workflow(run.workflow_id).state == "failed"
    page = workflow_viewer.get(reverse(DETAIL, args=[run.workflow_id])).content.decode()
    assert "retry-step" not in page
    assert (
        workflow_viewer.post(reverse(RETRY, args=[run.workflow_id]), {"step": "1"}).status_code
        == 403
    )
    assert awa.get_workflow(run.workflow_id).step("1").state == "failed"
    page = operator_client.get(reverse(DETAIL, args=[run.workflow_id])).content.decode()
    assert page.count('class="retry-step"') == 1  # only the failed step, not its dependent
    response = operator_client.post(reverse(RETRY, args=[run.workflow_id]), {"step": "1"})
    assert response.status_code == 302
    entry = LogEntry.objects.get(object_id=str(run.workflow_id))
    assert entry.user == User.objects.get(username="operator")
    assert "Retried step '1'" in entry.change_message
    run_burst()
    state = awa.wait_workflow(run.workflow_id, timeout=10)
    assert state.state == "completed" and state.step("2").result == ["fixed"]
    again = operator_client.post(
        reverse(RETRY, args=[run.workflow_id]), {"step": "1"}, follow=True
    ).content.decode()
    assert "was not retried: step &#x27;1&#x27; is completed" in again
    assert LogEntry.objects.filter(object_id=str(run.workflow_id)).count() == 1


def test_outsiders_see_nothing(outsider_client):  # noqa: F811
    assert outsider_client.get(reverse(LIST)).status_code == 403
