"""A real in-process worker runs handlers and records each outcome as specified."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings

import awa_django as awa
from awa_django.declarations.jobs import registry
from awa_django.storage.browse import job_progress
from awa_django.storage.statement import run
from awa_django.worker import dispatcher
from tests.conftest import BackgroundWorker, run_burst, wait_until
from tests.jobs import (
    always_fails,
    cancels,
    noop,
    nul_cancel,
    nul_failure,
    orm_thread_pid,
    record,
    record_async,
    record_run,
    retry_after,
    returns_outcome,
    snooze_once,
    terminal,
)
from tests.misbehaving import surrogate_cancel, surrogate_failure

pytestmark = pytest.mark.usefixtures("awa_db")

FAST_RETRY = {
    "QUEUES": {"default": {"concurrency": 4}, "email": {"concurrency": 2}},
    "RETRY_BACKOFF_BASE_S": 0.02,
    "RETRY_JITTER": 0,
    "POLL_INTERVAL_S": 0.1,
    "PROMOTE_INTERVAL_S": 0.05,
}


def runs(job_id: int) -> list[tuple[int, int, str]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attempt, run_lease, note FROM tests_job_runs WHERE job_id = %s ORDER BY id",
            [job_id],
        )
        return cursor.fetchall()


def test_sync_and_async_handlers_complete():
    sync_id = record.enqueue(n=1)
    async_id = record_async.enqueue(n=2)
    summary = run_burst()
    assert summary.claimed == 2 and summary.stale == 0
    assert awa.get_job(sync_id).state == "completed"
    assert awa.get_job(async_id).state == "completed"
    assert runs(sync_id) == [(1, 1, "1")]
    assert runs(async_id) == [(1, 1, "async 2")]


@override_settings(AWA=FAST_RETRY)
def test_exhausted_retries_fail_with_every_error_and_growing_backoff():
    job_id = always_fails.enqueue(message="nope")
    run_burst(burst_wait_s=5)
    job = awa.get_job(job_id)
    assert job.state == "failed"
    assert job.attempt == 3
    assert [e["message"] for e in job.errors] == [f"nope on attempt {i}" for i in (1, 2, 3)]
    assert all(e["type"] == "builtins.RuntimeError" for e in job.errors)
    assert "RuntimeError" in job.errors[-1]["traceback"]


@override_settings(AWA=FAST_RETRY)
def test_retry_after_counts_an_attempt_then_completes():
    job_id = retry_after.enqueue(seconds=0.05)
    run_burst(burst_wait_s=5)
    job = awa.get_job(job_id)
    assert job.state == "completed"
    assert [(a, lease) for a, lease, _ in runs(job_id)] == [(1, 1), (2, 2)]
    assert len(job.errors) == 1


@override_settings(AWA=FAST_RETRY)
def test_snooze_does_not_use_an_attempt():
    job_id = snooze_once.enqueue()  # max_attempts=1: a counted retry would fail it
    run_burst(burst_wait_s=5)
    assert awa.get_job(job_id).state == "completed"
    assert [(a, lease) for a, lease, _ in runs(job_id)] == [(1, 1), (1, 2)]


def test_cancel_and_terminal_error_end_as_specified():
    cancelled = cancels.enqueue()
    failed = terminal.enqueue()
    returned = returns_outcome.enqueue()
    run_burst()
    cancelled_job = awa.get_job(cancelled)
    assert cancelled_job.state == "cancelled"
    assert cancelled_job.errors[-1]["reason"] == "not needed any more"
    failed_job = awa.get_job(failed)
    assert (failed_job.state, failed_job.attempt) == ("failed", 1)
    assert failed_job.errors[-1]["type"] == "tests.jobs.PaymentDeclined"
    assert awa.get_job(returned).state == "cancelled"


def elsewhere(**awa_settings: object) -> override_settings:
    """Settings under which "nobody.*" kinds may be enqueued without a handler."""
    return override_settings(AWA={**settings.AWA, **awa_settings, "EXTERNAL_KINDS": ["nobody.*"]})


def test_an_unknown_kind_waits_without_using_its_attempt_and_the_worker_goes_on():
    with elsewhere():
        unknown = awa.enqueue("nobody.registered", args={"x": 1}, max_attempts=1)
    after = record.enqueue(n=5)
    summary = run_burst()
    job = awa.get_job(unknown)
    assert (job.state, job.attempt, job.max_attempts) == ("retryable", 0, 1)
    (error,) = job.errors
    assert error["type"] == "awa_django.exceptions.UnknownJobKind"
    assert error["message"].startswith("unknown job kind 'nobody.registered': no handler ")
    assert "AWA['JOB_MODULES']" in error["message"] and error["tries"] == 1
    assert awa.get_job(after).state == "completed"
    assert summary.claimed == 2


def test_a_job_nobody_knows_fails_after_the_timeout_with_one_entry_for_its_wait():
    fast = {"RETRY_BACKOFF_BASE_S": 0.02, "RETRY_JITTER": 0, "UNKNOWN_KIND_TIMEOUT_S": 0.3}
    with elsewhere(**fast):
        job_id = awa.enqueue("nobody.registered", args={}, max_attempts=1)
        run_burst(burst_wait_s=2.0)
    job = awa.get_job(job_id)
    assert (job.state, job.attempt) == ("failed", 1)
    # Every try of the wait replaced its entry: one for the wait, one for the failure.
    waited, failed = job.errors
    assert waited["tries"] >= 3 and "waiting_since" in waited
    assert failed["waited_s"] >= 0.3 and "waiting_since" not in failed
    assert failed["message"].endswith("(AWA['UNKNOWN_KIND_TIMEOUT_S'] is 0.3s): failed.")


def test_a_waiting_job_runs_once_a_worker_knows_its_kind():
    with elsewhere():
        job_id = awa.enqueue("nobody.deployed_later", args={"n": 7}, max_attempts=1)
    run_burst()
    assert awa.get_job(job_id).state == "retryable"

    @awa.job(kind="nobody.deployed_later")
    def deployed_later(ctx: awa.JobContext, n: int) -> None:
        record_run(ctx, str(n))

    try:
        assert awa.run_now(job_id)  # what an operator does once the new workers run
        run_burst()
    finally:
        registry.unregister(deployed_later)
    job = awa.get_job(job_id)
    assert (job.state, job.attempt) == ("completed", 1)
    assert [(attempt, note) for attempt, _, note in runs(job_id)] == [(1, "7")]


def test_future_run_at_is_not_run_early():
    job_id = awa.enqueue(record, args={"n": 1}, run_at=timedelta(hours=1))
    run_burst()
    assert awa.get_job(job_id).state == "scheduled"
    assert runs(job_id) == []


@override_settings(AWA=FAST_RETRY)
def test_scheduled_job_runs_once_due():
    job_id = awa.enqueue(record, args={"n": 1}, run_at=timedelta(milliseconds=300))
    run_burst(burst_wait_s=5)
    assert awa.get_job(job_id).state == "completed"
    assert len(runs(job_id)) == 1
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT r.at >= j.run_at FROM tests_job_runs r, awa.jobs j "
            "WHERE j.job_id = %s AND r.job_id = %s",
            [job_id, job_id],
        )
        assert cursor.fetchone() == (True,)


@override_settings(AWA={**FAST_RETRY, "POLL_INTERVAL_S": 30})
def test_notify_not_poll_wakes_the_worker():
    worker = BackgroundWorker(queues={"default": 2}).start()
    try:
        job_id = noop.enqueue(n=1)
        # With a 30 s poll interval, only the NOTIFY at commit can explain a prompt pickup.
        wait_until(lambda: awa.get_job(job_id).state == "completed", timeout=10)
    finally:
        worker.stop()


def test_many_jobs_complete_in_batches_exactly_once():
    ids = noop.enqueue_many([{"n": i} for i in range(500)])
    summary = run_burst()
    assert summary.claimed == 500 and summary.written == 500 and summary.stale == 0
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), count(DISTINCT job_id) FROM awa.done_entries "
            "WHERE outcome = 'completed'"
        )
        assert cursor.fetchone() == (500, 500)
    assert {j.state for j in awa.get_jobs(ids)} == {"completed"}


def test_nul_characters_in_errors_reasons_and_progress_do_not_block_completions():
    failing = nul_failure.enqueue()
    cancelled = nul_cancel.enqueue()
    fine = noop.enqueue(n=1)
    # A background worker, not a burst: a NUL reaching jsonb would fail the completion batch on
    # every retry, and a burst would wait for it forever instead of failing this test.
    worker = BackgroundWorker(queues={"default": 4}).start()
    try:
        wait_until(lambda: awa.get_job(fine).state == "completed", timeout=10)
    finally:
        summary = worker.stop(timeout=10)
    assert summary.claimed == 3 and summary.written == 3 and summary.stale == 0
    job = awa.get_job(failing)
    assert job.state == "retryable"
    assert job.errors[0]["message"] == "before\\x00after"
    with connection.cursor() as cursor:
        saved = run(cursor, job_progress(failing))
    assert saved is not None and saved.progress == {"percent": 50, "message": "half\\x00way"}
    cancel = awa.get_job(cancelled)
    assert cancel.state == "cancelled"
    assert cancel.errors[-1]["reason"] == "no\\x00longer"
    assert awa.get_job(fine).state == "completed"


def test_lone_surrogates_in_errors_reasons_and_progress_are_escaped_and_block_nothing():
    failing = surrogate_failure.enqueue()
    cancelled = surrogate_cancel.enqueue()
    fine = [noop.enqueue(n=n) for n in range(20)]
    worker = BackgroundWorker(queues={"default": 4}).start()
    try:
        wait_until(lambda: {j.state for j in awa.get_jobs(fine)} == {"completed"}, timeout=10)
        wait_until(lambda: awa.get_job(cancelled).state == "cancelled", timeout=10)
    finally:
        summary = worker.stop(timeout=10)
    assert summary.claimed == 22 and summary.written == 22 and summary.stale == 0
    job = awa.get_job(failing)
    assert job.state == "retryable"
    assert job.errors[0]["message"] == "bad \\udcff text"
    assert "bad \\udcff text" in job.errors[0]["traceback"]
    with connection.cursor() as cursor:
        saved = run(cursor, job_progress(failing))
    assert saved is not None and saved.progress == {"percent": 50, "message": "file \\udcff.txt"}
    assert awa.get_job(cancelled).errors[-1]["reason"] == "gone \\udcff away"


@override_settings(AWA=FAST_RETRY)
@pytest.mark.usefixtures("close_orm_thread_connection")
def test_a_failed_attempt_gets_the_next_batch_a_checked_orm_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Async handlers share asgiref's one ORM thread. Only a failure may trigger its connection
    # check during this test, not the periodic one.
    monkeypatch.setattr(dispatcher, "ORM_THREAD_CHECK_INTERVAL_S", 3600.0)
    worker = BackgroundWorker(queues={"default": 2}).start()
    try:
        first = orm_thread_pid.enqueue()
        wait_until(lambda: awa.get_job(first).state == "completed", timeout=10)
        [(_, _, pid)] = runs(first)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [int(pid)])
        second = orm_thread_pid.enqueue()
        wait_until(lambda: awa.get_job(second).state in ("completed", "failed"), timeout=10)
    finally:
        worker.stop()
    job = awa.get_job(second)
    # The first attempt met the terminated connection; the check before the retry's batch
    # closed it, so the retry reconnected.
    assert job.state == "completed", job.errors
    assert job.attempt == 2
    assert [entry["attempt"] for entry in job.errors] == [1]
    assert "Error" in job.errors[0]["type"]
    assert [attempt for attempt, _, _ in runs(second)] == [2]
