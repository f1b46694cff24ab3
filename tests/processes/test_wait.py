"""``awa.wait`` and ``awa.await_job`` against real worker processes: they wake on the
notification of the job's end, raise for failures and timeouts, clean up after themselves and
after killed waiters, and a job nobody waits on ends without any notification."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from django.db import connection, transaction
from django.test import override_settings

import awa_django as awa
from awa_django.producer import workflows as workflow_api
from awa_django.storage.connections import connection_kwargs
from awa_django.storage.waiters import JOB_DONE_CHANNEL
from tests.callbacks.helpers import FAST as CALLBACK_FAST
from tests.callbacks.helpers import park_one
from tests.conftest import (
    REPO_ROOT,
    close_this_threads_connection,
    run_burst,
    subprocess_database_url,
    wait_until,
)
from tests.jobs import always_fails, returns_value, sleepy, terminal

# Well under the waiter's one-second fallback poll: a wake this fast came from the notification.
NOTIFIED_WITHIN_S = 0.5


def waiter_rows() -> list[tuple[int, int]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT job_id, pid FROM awa.job_waiters ORDER BY job_id, pid")
        return cursor.fetchall()


def in_background(func: Any, *args: Any, **kwargs: Any) -> tuple[threading.Thread, list[Any]]:
    """Run ``func`` in a thread; the list gets its return value or exception."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(func(*args, **kwargs))
        except BaseException as exc:  # handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_wait_returns_the_completed_record_as_soon_as_the_job_ends(worker_process):
    worker_process().wait_ready()
    job_id = returns_value.enqueue(value={"paid": True})
    record = awa.wait(job_id, timeout=30)
    returned = time.time()
    assert record.state == "completed" and record.result == {"paid": True}
    assert returned - record.finalized_at.timestamp() < NOTIFIED_WITHIN_S
    assert waiter_rows() == []


def test_await_job_is_the_async_twin(worker_process):
    worker_process().wait_ready()
    job_id = returns_value.enqueue(value=[1, 2])
    record = asyncio.run(awa.await_job(job_id, timeout=30))
    assert record.state == "completed" and record.result == [1, 2]
    assert waiter_rows() == []


def test_a_failed_job_raises_job_failed_with_its_errors(worker_process):
    worker_process().wait_ready()
    job_id = terminal.enqueue()
    with pytest.raises(awa.JobFailed) as caught:
        awa.wait(job_id, timeout=30)
    failure = caught.value
    assert failure.record.job_id == job_id and failure.record.state == "failed"
    assert failure.errors == failure.record.errors and len(failure.errors) == 1
    assert str(failure).startswith(f"job {job_id} (tests.terminal) ended failed: ")


@pytest.mark.usefixtures("awa_db")
def test_a_waiter_waits_through_retries_until_the_job_is_dead_lettered():
    dlq = {"QUEUES": {"default": {"dlq": True}}, "RETRY_BACKOFF_BASE_S": 0.01}
    with override_settings(AWA=dlq):
        job_id = always_fails.enqueue(message="down")
        thread, outcome = in_background(awa.wait, job_id, timeout=30)
        wait_until(lambda: waiter_rows() != [])
        run_burst(burst_wait_s=1.0)
        thread.join(30)
    (failure,) = outcome
    assert isinstance(failure, awa.JobFailed) and failure.record.state == "dlq"
    assert [error["attempt"] for error in failure.errors] == [1, 2, 3]
    assert str(failure) == f"job {job_id} (tests.always_fails) ended dlq: down on attempt 3"


@pytest.mark.usefixtures("awa_db")
def test_cancelling_a_queued_job_wakes_its_waiter():
    job_id = returns_value.enqueue()
    thread, outcome = in_background(awa.wait, job_id, timeout=30)
    wait_until(lambda: waiter_rows() != [])
    cancelled_at = time.monotonic()
    assert awa.cancel(job_id)
    thread.join(30)
    assert time.monotonic() - cancelled_at < NOTIFIED_WITHIN_S
    (failure,) = outcome
    assert isinstance(failure, awa.JobFailed) and failure.record.state == "cancelled"


def test_wait_workflow_wakes_on_the_workflow_done_notification(awa_db, monkeypatch):
    # With the fallback read a minute away, only the notification can end this wait in time.
    monkeypatch.setattr(workflow_api, "FALLBACK_POLL_S", 60.0)
    run = awa.Workflow("waited").step("only", returns_value).enqueue()

    def wait_in_thread() -> awa.WorkflowState:
        try:
            return awa.wait_workflow(run.workflow_id, timeout=30)
        finally:
            close_this_threads_connection()

    thread, outcome = in_background(wait_in_thread)

    def listening_waiters() -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE application_name = 'awa_wait' AND query LIKE '%%LISTEN awa_workflow_done'"
            )
            return int(cursor.fetchone()[0])

    wait_until(lambda: listening_waiters() == 1)
    assert awa.cancel_workflow(run.workflow_id, reason="stop") == 1
    thread.join(10)
    assert not thread.is_alive()
    (state,) = outcome
    assert state.state == "cancelled"
    # The waiter's session is closed once it returns.
    wait_until(lambda: listening_waiters() == 0)


def test_timeout_raises_wait_timeout_and_leaves_no_row(worker_process):
    worker_process().wait_ready()
    job_id = sleepy.enqueue(seconds=5)
    wait_until(lambda: awa.get_job(job_id).state == "running")
    started = time.monotonic()
    with pytest.raises(awa.WaitTimeout) as caught:
        awa.wait(job_id, timeout=0.3)
    assert 0.3 <= time.monotonic() - started < 2
    assert isinstance(caught.value, TimeoutError)
    assert caught.value.record.state == "running"
    assert waiter_rows() == []


def test_a_waiter_registered_before_any_worker_runs_wakes_when_one_does(worker_process):
    job_id = returns_value.enqueue(value="late")
    thread, outcome = in_background(awa.wait, job_id, timeout=60)
    wait_until(lambda: [job for job, _ in waiter_rows()] == [job_id])
    worker_process().wait_ready()
    thread.join(60)
    (record,) = outcome
    assert isinstance(record, awa.JobRecord) and record.result == "late"
    assert time.time() - record.finalized_at.timestamp() < NOTIFIED_WITHIN_S + 1


def test_many_waiters_on_one_job_all_wake(worker_process):
    job_id = sleepy.enqueue(seconds=1)
    with ThreadPoolExecutor(max_workers=20) as pool:
        waits = [pool.submit(awa.wait, job_id, timeout=60) for _ in range(20)]
        wait_until(lambda: len(waiter_rows()) == 20)
        worker_process().wait_ready()
        records = [future.result(60) for future in waits]
    assert {record.state for record in records} == {"completed"}
    assert waiter_rows() == []


@pytest.mark.usefixtures("awa_db")
def test_a_killed_waiters_row_is_deleted_by_the_next_waiter():
    blocked = returns_value.enqueue()
    script = f"import awa_django as awa; awa.wait({blocked}, timeout=120)"
    env = {**os.environ, "DATABASE_URL": subprocess_database_url(), "AWA_JOB_MODULES": "tests.jobs"}
    waiter = subprocess.Popen(
        [sys.executable, "manage.py", "shell", "-c", script], cwd=REPO_ROOT, env=env
    )
    try:
        wait_until(lambda: len(waiter_rows()) == 1, 30)
        ((_, pid),) = waiter_rows()
    finally:
        waiter.kill()
        waiter.wait(10)

    def session_ended() -> bool:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
            return cursor.fetchone()[0] == 0

    wait_until(session_ended)
    assert [job for job, _ in waiter_rows()] == [blocked]  # left behind by the killed waiter
    other = returns_value.enqueue()
    thread, _ = in_background(awa.wait, other, timeout=30)
    wait_until(lambda: [job for job, _ in waiter_rows()] == [other])
    awa.cancel(other)
    thread.join(30)
    assert waiter_rows() == []


@pytest.mark.usefixtures("awa_db")
def test_jobs_nobody_waits_on_end_without_a_notification():
    with psycopg.connect(**connection_kwargs("default"), autocommit=True) as listener:
        listener.execute(f"LISTEN {JOB_DONE_CHANNEL}")
        silent = [returns_value.enqueue(value=n) for n in range(20)]
        silent.append(terminal.enqueue())
        cancelled = returns_value.enqueue()
        awa.cancel(cancelled)
        run_burst()
        assert {awa.get_job(job_id).state for job_id in silent} == {"completed", "failed"}
        assert list(listener.notifies(timeout=0.5)) == []

        # The same listener hears the end of a job that someone waits on.
        waited = returns_value.enqueue()
        thread, outcome = in_background(awa.wait, waited, timeout=30)
        wait_until(lambda: waiter_rows() != [])
        run_burst()
        thread.join(30)
        heard = [n.payload for n in listener.notifies(timeout=0.5)]
    assert heard == [str(waited)] and outcome[0].state == "completed"


@pytest.mark.usefixtures("awa_db")
def test_a_job_parked_on_a_callback_is_waited_on_until_it_completes():
    with override_settings(AWA=CALLBACK_FAST):
        job_id, token = park_one()
        with pytest.raises(awa.WaitTimeout) as caught:
            awa.wait(job_id, timeout=0.2)
        assert caught.value.record.state == "waiting_external"
        thread, outcome = in_background(awa.wait, job_id, timeout=30)
        wait_until(lambda: waiter_rows() != [])
        awa.complete_external(token, payload={"ok": 1})
        thread.join(30)
    (record,) = outcome
    assert isinstance(record, awa.JobRecord) and record.result == {"ok": 1}


@pytest.mark.usefixtures("awa_db")
def test_waiting_inside_the_transaction_that_enqueued_the_job_is_refused():
    with transaction.atomic():
        job_id = returns_value.enqueue()
        with pytest.raises(awa.JobNotFound, match="not committed") as caught:
            awa.wait(job_id, timeout=1)
    assert caught.value.job_id == job_id
    assert waiter_rows() == []


@pytest.mark.usefixtures("awa_db")
@pytest.mark.parametrize("job_id", [10**12, 0, -1, 2**63, "7", None])
def test_an_id_that_names_no_job_raises_job_not_found(job_id):
    with pytest.raises(awa.JobNotFound) as caught:
        awa.wait(job_id, timeout=1)
    assert isinstance(caught.value, LookupError) and caught.value.job_id == job_id


@pytest.mark.usefixtures("awa_db")
@pytest.mark.parametrize("timeout", [-1, float("nan"), float("inf"), "5", None, True])
def test_a_bad_timeout_is_a_value_error_naming_it(timeout):
    job_id = returns_value.enqueue()
    with pytest.raises(ValueError, match=r"^timeout must be"):
        awa.wait(job_id, timeout=timeout)
