"""Every traceback awa_django stores, logs or shows starts at the job's own code: sync and async
handlers, ``django.tasks`` tasks and in-process runs; in the stored errors, the ERROR line's
``exc_info``, the admin's job and DLQ pages, ``awa_jobs dump`` and the ``TaskResult``'s
errors. None of them shows the frames of the worker that ran the handler."""

from __future__ import annotations

import io
import json
import logging

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse

import awa_django as awa
from awa_django.testing import run_jobs
from tests.admin.conftest import operator_client  # noqa: F401 (a fixture)
from tests.conftest import run_burst
from tests.jobs import always_fails
from tests.tasks import tasks

pytestmark = pytest.mark.usefixtures("awa_db", "close_orm_thread_connection")

QUEUES = {"default": {}, "email": {"dlq": True}}


@awa.job(kind="tests.tracebacks.async_fails", queue="email", max_attempts=1)
async def async_fails(ctx: awa.JobContext) -> None:
    raise LookupError("no such order")


def starts_at(text: str, path: str, function: str) -> None:
    """``text`` is a traceback whose first frame is ``function`` in ``path`` and that shows
    nothing of awa_django."""
    lines = text.splitlines()
    assert lines[0] == "Traceback (most recent call last):", text
    assert lines[1].startswith("  File ") and path in lines[1], text
    assert lines[1].endswith(f", in {function}"), text
    assert "awa_django" not in text, text


def stored_traceback(job_id: int) -> str:
    return str(awa.get_job(job_id).errors[-1]["traceback"])


@override_settings(AWA={"QUEUES": QUEUES})
def test_worker_runs_store_and_log_tracebacks_from_the_handler(caplog, operator_client):  # noqa: F811
    caplog.set_level(logging.INFO, logger="awa_django")
    sync_job = awa.enqueue(always_fails, max_attempts=1, args={"message": "disk full"})
    async_job = async_fails.enqueue()
    task_result = tasks.always_fails.enqueue()
    run_burst()

    starts_at(stored_traceback(sync_job), "tests/jobs.py", "always_fails")
    starts_at(stored_traceback(async_job), "tests/observability/test_tracebacks.py", "async_fails")
    task_result.refresh()
    starts_at(task_result.errors[0].traceback, "tests/tasks/tasks.py", "always_fails")
    starts_at(stored_traceback(int(task_result.id)), "tests/tasks/tasks.py", "always_fails")

    # The ERROR lines (the two jobs that failed for good) carry the same traceback.
    # (Django's own task logging reports the task that failed at once too, without job ids.)
    logged = {
        r.job_id: r
        for r in caplog.records
        if r.levelno == logging.ERROR and r.name.startswith("awa_django")
    }
    formatter = logging.Formatter()
    starts_at(formatter.formatException(logged[sync_job].exc_info), "tests/jobs.py", "always_fails")
    assert logged[async_job].outcome == "dlq"
    starts_at(
        formatter.formatException(logged[async_job].exc_info),
        "tests/observability/test_tracebacks.py",
        "async_fails",
    )

    # What operators read: the admin's job page, its DLQ page, awa_jobs dump.
    page = operator_client.get(reverse("admin:awa_django_job_change", args=[sync_job]))
    assert page.status_code == 200
    assert "RuntimeError: disk full on attempt 1" in page.content.decode()
    assert "awa_django/worker" not in page.content.decode()
    dead = operator_client.get(reverse("admin:awa_django_deadletter_change", args=[async_job]))
    assert dead.status_code == 200
    assert "LookupError: no such order" in dead.content.decode()
    assert "awa_django/worker" not in dead.content.decode()
    out = io.StringIO()
    call_command("awa_jobs", "dump", str(sync_job), stdout=out)
    (dumped,) = json.loads(out.getvalue())
    starts_at(dumped["errors"][-1]["traceback"], "tests/jobs.py", "always_fails")


def test_in_process_runs_store_tracebacks_from_the_handler():
    job_id = awa.enqueue(always_fails, max_attempts=1)
    run_jobs()
    starts_at(stored_traceback(job_id), "tests/jobs.py", "always_fails")
