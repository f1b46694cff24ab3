"""Sequential waits: the handler keeps its slot, ``resume_external`` wakes it in the same attempt
(by NOTIFY, or by polling when no notification arrives) and it carries on to completion."""

from __future__ import annotations

import json
import time

import pytest
from django.db import connection
from django.test import override_settings

import awa_django as awa
from tests.callbacks.helpers import (
    FAST,
    expire_callbacks,
    notes,
    rescue,
    scalar,
    snapshot,
    state,
    wait_for_state,
    wait_for_token,
)
from tests.conftest import BackgroundWorker, wait_until
from tests.jobs import waits, waits_sync, waits_then_overruns

pytestmark = [pytest.mark.usefixtures("awa_db"), pytest.mark.django_db(transaction=True)]


def attempts_and_leases(job_id: int) -> tuple[int, int]:
    runs = scalar(
        "SELECT count(DISTINCT run_lease) FROM tests_job_runs WHERE job_id = %s", [job_id]
    )
    return runs, scalar("SELECT count(*) FROM awa.claim_receipts WHERE job_id = %s", [job_id])


def test_async_handler_resumes_with_the_payload_in_the_same_attempt():
    with override_settings(AWA={**FAST, "POLL_INTERVAL_S": 30.0}):
        worker = BackgroundWorker().start()
        try:
            job_id = waits.enqueue()
            token = wait_for_token(job_id)
            wait_for_state(job_id, "waiting_external")
            started = time.monotonic()
            awa.resume_external(token, {"approved": True, "by": "ops"})
            # Polling is 30 s here: finishing fast proves the NOTIFY woke the waiting handler.
            wait_for_state(job_id, "completed", timeout=10)
            assert time.monotonic() - started < 10
            expected = json.dumps({"approved": True, "by": "ops"}, sort_keys=True)
            assert notes(job_id)[-1] == f"resumed={expected}"
            assert attempts_and_leases(job_id) == (1, 1)
            assert awa.get_job(job_id).attempt == 1
        finally:
            worker.stop()


def test_sync_handler_waits_twice_and_polling_finds_a_resume_without_notify():
    with override_settings(AWA={**FAST, "POLL_INTERVAL_S": 0.2}):
        worker = BackgroundWorker().start()
        try:
            job_id = waits_sync.enqueue()
            first = wait_for_token(job_id)
            wait_for_state(job_id, "waiting_external")
            awa.resume_external(first, [1, 2])
            second = wait_for_token(job_id, 2)
            assert second != first
            wait_for_state(job_id, "waiting_external")
            # The resume without its NOTIFY: only the poll can see it.
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE awa.leases SET callback_resumed_at = now(), callback_payload = '\"p\"'"
                    " WHERE job_id = %s",
                    [job_id],
                )
            wait_for_state(job_id, "completed", timeout=10)
            assert [n for n in notes(job_id) if n.startswith("resumed")] == [
                "resumed1=[1, 2]",
                'resumed2="p"',
            ]
            assert attempts_and_leases(job_id) == (1, 1)
        finally:
            worker.stop()


def test_resume_before_the_handler_waits_is_not_lost():
    """The outside system may answer between register_callback and wait_for_callback."""
    from tests.jobs import record_run

    @awa.job(kind="tests.resumes_itself_first")
    def resumes_itself_first(ctx):
        token = ctx.register_callback(timeout=60)
        awa.resume_external(token, "early")
        record_run(ctx, f"got={ctx.wait_for_callback_sync(token)}")

    try:
        with override_settings(AWA={**FAST, "POLL_INTERVAL_S": 30.0}):
            worker = BackgroundWorker().start()
            try:
                job_id = resumes_itself_first.enqueue()
                wait_for_state(job_id, "completed", timeout=10)
                assert notes(job_id) == ["got=early"]
            finally:
                worker.stop()
    finally:
        from awa_django.declarations.jobs import registry

        registry.unregister(resumes_itself_first)


def test_duplicate_resume_resolves_once_and_a_resumed_token_is_stale():
    with override_settings(AWA=FAST):
        worker = BackgroundWorker().start()
        try:
            job_id = waits.enqueue()
            token = wait_for_token(job_id)
            wait_for_state(job_id, "waiting_external")
            awa.resume_external(token, "first")
            outcomes = []
            for payload in ("second", "third"):
                try:
                    awa.resume_external(token, payload)
                    outcomes.append("ok")
                except awa.StaleCallback:
                    outcomes.append("stale")
            wait_for_state(job_id, "completed")
            assert outcomes == ["stale", "stale"]
            assert notes(job_id)[-1] == 'resumed="first"'
        finally:
            worker.stop()


def test_external_complete_ends_a_sequential_wait():
    with override_settings(AWA=FAST):
        worker = BackgroundWorker().start()
        try:
            job_id = waits.enqueue()
            token = wait_for_token(job_id)
            wait_for_state(job_id, "waiting_external")
            assert awa.complete_external(token, {"done": 1}) == "completed"
            # The waiting handler is told (awa_cancel) and gives up; its own result is stale.
            wait_until(lambda: not list(worker.runtime.running_attempts()), timeout=10)
            assert state(job_id) == "completed"
            assert awa.get_job(job_id).result == {"done": 1}
            assert not any(n.startswith("resumed") for n in notes(job_id))
        finally:
            summary = worker.stop()
        assert summary.stale == 1


def test_timed_out_sequential_wait_is_rescued_and_its_handler_stops():
    with override_settings(AWA=FAST):
        worker = BackgroundWorker(maintenance=False).start()
        try:
            job_id = waits.enqueue()
            token = wait_for_token(job_id)
            wait_for_state(job_id, "waiting_external")
            expire_callbacks()
            assert rescue().rescued == 1
            assert state(job_id) == "retryable"
            wait_until(lambda: not list(worker.runtime.running_attempts()), timeout=10)
            before = snapshot(job_id)
            with pytest.raises(awa.StaleCallback):
                awa.resume_external(token, "too late")
            assert snapshot(job_id) == before
        finally:
            worker.stop()


def test_stopping_worker_ends_a_sequential_wait_so_the_job_retries():
    # A backoff of a minute keeps the retry scheduled: with FAST's 0.02 s the stopping worker's
    # leader could promote it to available before the worker stopped.
    settings = {**FAST, "POLL_INTERVAL_S": 30.0, "RETRY_BACKOFF_BASE_S": 60.0}
    with override_settings(AWA=settings):
        worker = BackgroundWorker(shutdown_timeout_s=60.0).start()
        job_id = waits.enqueue()
        token = wait_for_token(job_id)
        wait_for_state(job_id, "waiting_external")
        started = time.monotonic()
        summary = worker.stop()
    # Well inside the 60 s shutdown timeout and the 30 s poll: the wait ended on the stop.
    assert time.monotonic() - started < 20
    assert summary.abandoned == 0
    job = awa.get_job(job_id)
    assert job.state == "retryable"
    assert "worker stopping" in job.errors[-1]["message"]
    with pytest.raises(awa.StaleCallback):
        awa.resume_external(token, "late")


DEADLINE_1S = {**FAST, "QUEUES": {"default": {"concurrency": 1, "deadline_s": 1.0}}}


def test_a_sequential_wait_longer_than_the_deadline_does_not_stop_the_attempt():
    # The callback's timeout governs a waiting attempt; the queue's deadline waits with it.
    with override_settings(AWA=DEADLINE_1S):
        worker = BackgroundWorker().start()
        try:
            job_id = waits_sync.enqueue()
            for step in (1, 2):
                token = wait_for_token(job_id, step)
                time.sleep(1.5)
                awa.resume_external(token, step)
            wait_for_state(job_id, "completed", timeout=10)
            assert attempts_and_leases(job_id) == (1, 1)
        finally:
            worker.stop()


def test_a_resumed_attempt_runs_on_against_a_fresh_deadline():
    with override_settings(AWA=DEADLINE_1S):
        worker = BackgroundWorker().start()
        try:
            job_id = waits_then_overruns.enqueue(seconds=6.0)
            token = wait_for_token(job_id)
            time.sleep(1.5)
            awa.resume_external(token, "go")
            resumed = time.monotonic()
            wait_for_state(job_id, "failed", timeout=10)
            # Stopped a deadline after the resume, not at once and not after its 6 s.
            assert 0.9 < time.monotonic() - resumed < 5
            assert notes(job_id)[-1] == "resumed"
            error = awa.get_job(job_id).errors[-1]
            assert error["type"] == "awa_django.exceptions.DeadlineExceeded"
        finally:
            worker.stop()
