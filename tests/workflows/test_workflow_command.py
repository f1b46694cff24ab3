"""``manage.py awa_workflows list|show|cancel|retry``."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

import awa_django as awa
from tests.conftest import run_burst
from tests.workflows.jobs import add, collect, fail, fail_first_run

pytestmark = pytest.mark.usefixtures("awa_db")


def run(*args: str) -> str:
    out = StringIO()
    call_command("awa_workflows", *args, stdout=out)
    return out.getvalue()


def test_list_show_and_cancel():
    done = awa.chain(awa.call(fail), awa.call(add, x=1), name="nightly").enqueue()
    run_burst()
    waiting = awa.chain(awa.call(add, x=1), awa.call(add, x=2), name="import").enqueue()

    lines = run("list").splitlines()
    assert lines[0].split()[:3] == ["id", "name", "state"]
    assert lines[1].split()[:3] == [str(waiting.workflow_id), "import", "running"]
    assert [w["name"] for w in json.loads(run("list", "--state", "failed", "--json"))] == [
        "nightly"
    ]
    shown = run("show", str(done.workflow_id))
    assert "failed" in shown and "dependency 1 failed" in shown
    assert json.loads(run("show", str(done.workflow_id), "--json"))["steps"][1]["state"] == (
        "cancelled"
    )
    assert run("cancel", str(waiting.workflow_id)) == (
        f"cancelled workflow {waiting.workflow_id}: 2 steps\n"
    )
    with pytest.raises(CommandError, match="is not running"):
        run("cancel", str(waiting.workflow_id))
    with pytest.raises(CommandError, match="no workflow 999999"):
        run("show", "999999")


def test_retry_a_failed_step():
    wf = awa.chain(awa.call(fail_first_run), awa.call(collect)).enqueue()
    run_burst()
    with pytest.raises(CommandError, match="step '2' is cancelled, not failed"):
        run("retry", str(wf.workflow_id), "2")
    with pytest.raises(CommandError, match="has no step 'nope'"):
        run("retry", str(wf.workflow_id), "nope")
    assert run("retry", str(wf.workflow_id), "1") == (
        f"retried step '1' of workflow {wf.workflow_id}: it runs again\n"
    )
    run_burst()
    assert awa.wait_workflow(wf.workflow_id, timeout=10).state == "completed"
    with pytest.raises(CommandError, match="no such workflow"):
        run("retry", "999999", "1")
