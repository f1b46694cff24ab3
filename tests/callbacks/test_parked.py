"""Parked callbacks against real PostgreSQL and an in-process worker: the slot is freed, and an
outside result completes, fails or retries the attempt exactly once; timeouts are rescued."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.test import override_settings
from django.utils import timezone

import awa_django as awa
from tests.callbacks.helpers import (
    FAST,
    expire_callbacks,
    notes,
    promote_retries,
    rescue,
    scalar,
    snapshot,
    state,
    tokens,
    wait_for_state,
    wait_for_token,
    wait_parked,
)
from tests.conftest import BackgroundWorker, wait_until
from tests.jobs import exact_repr, parks, record
from tests.test_unique import sweep

pytestmark = [pytest.mark.usefixtures("awa_db"), pytest.mark.django_db(transaction=True)]


def test_parked_attempt_frees_its_slot_and_completes_externally(worker):
    parked = parks.enqueue()
    token = wait_for_token(parked)
    wait_parked(parked)
    # Concurrency 1: this job can only run because the parked one gave its slot back.
    other = record.enqueue(n=7)
    wait_for_state(other, "completed")
    assert state(parked) == "waiting_external"
    assert (
        scalar(
            "SELECT count(*) FROM awa.leases WHERE job_id = %s AND callback_parked_at IS NOT NULL",
            [parked],
        )
        == 1
    )

    assert awa.complete_external(token, {"charge": "ch_1"}) == "completed"
    job = awa.get_job(parked)
    assert job.state == "completed"
    assert job.result == {"charge": "ch_1"}
    assert job.attempt == 1
    # The attempt's lease (and with it the callback) is gone.
    assert scalar("SELECT count(*) FROM awa.leases WHERE job_id = %s", [parked]) == 0


def test_external_fail_retries_then_fails_when_out_of_attempts(worker):
    job_id = parks.enqueue()  # max_attempts=2
    first = wait_for_token(job_id)
    wait_parked(job_id)
    assert awa.fail_external(first, "card declined by issuer") == "retryable"
    # The retry runs a new attempt, which registers a new callback.
    second = wait_for_token(job_id, 2)
    assert second != first
    wait_parked(job_id)
    assert awa.fail_external(second, "card declined again") == "failed"
    job = awa.get_job(job_id)
    assert job.state == "failed"
    assert [e["message"] for e in job.errors] == ["card declined by issuer", "card declined again"]
    assert job.errors[0]["type"] == "awa_django.exceptions.CallbackFailed"


def test_external_retry_runs_the_job_again_after_the_delay(worker):
    job_id = parks.enqueue()
    first = wait_for_token(job_id)
    wait_parked(job_id)
    assert awa.retry_external(first, timedelta(seconds=0.2)) == "retryable"
    assert awa.get_job(job_id).state in ("retryable", "available", "running", "waiting_external")
    wait_for_token(job_id, 2)
    assert awa.get_job(job_id).attempt == 2


def test_external_retry_counts_its_delay_on_the_database_clock(worker):
    job_id = parks.enqueue()
    token = wait_for_token(job_id)
    wait_parked(job_id)
    # The caller's clock is an hour fast: the delay still runs from the database's now().
    with time_machine.travel(timezone.now() + timedelta(hours=1), tick=True):
        assert awa.retry_external(token, timedelta(seconds=30)) == "retryable"
    due_in = scalar(
        "SELECT extract(epoch FROM run_at - now()) FROM awa.deferred_jobs WHERE job_id = %s",
        [job_id],
    )
    assert 25 < due_in <= 30


def test_duplicate_and_stale_tokens_are_rejected_and_change_nothing(worker):
    job_id = parks.enqueue()
    token = wait_for_token(job_id)
    wait_parked(job_id)
    assert awa.complete_external(token) == "completed"
    before = snapshot(job_id)
    for resolve in (
        lambda: awa.complete_external(token),
        lambda: awa.fail_external(token, "late"),
        lambda: awa.retry_external(token),
        lambda: awa.heartbeat_callback(token, 60),
        lambda: awa.resume_external(token, 1),
    ):
        with pytest.raises(awa.StaleCallback, match="already closed as completed"):
            resolve()
    assert snapshot(job_id) == before
    with pytest.raises(awa.UnknownCallback):
        awa.complete_external("not-a-token")
    with pytest.raises(awa.UnknownCallback, match="no such attempt"):
        awa.complete_external(f"999999-1-{'a' * 32}")
    # Right attempt, wrong (guessed) callback id.
    forged = token.rsplit("-", 1)[0] + "-" + "0" * 32
    with pytest.raises(awa.StaleCallback):
        awa.complete_external(forged)


def test_resume_is_refused_for_a_parked_callback(worker):
    job_id = parks.enqueue()
    token = wait_for_token(job_id)
    wait_parked(job_id)
    before = snapshot(job_id)
    with pytest.raises(awa.StaleCallback, match="parked"):
        awa.resume_external(token, {"x": 1})
    assert snapshot(job_id) == before


def test_heartbeat_extends_the_timeout(worker):
    job_id = parks.enqueue(timeout_s=5.0)
    token = wait_for_token(job_id)
    wait_parked(job_id)
    old = scalar("SELECT callback_timeout_at FROM awa.leases WHERE job_id = %s", [job_id])
    new = awa.heartbeat_callback(token, timedelta(hours=2))
    assert new - old > timedelta(hours=1)
    assert scalar("SELECT callback_timeout_at FROM awa.leases WHERE job_id = %s", [job_id]) == new
    with pytest.raises(awa.InvalidCallback, match="timeout"):
        awa.heartbeat_callback(token, 0)


def test_bad_payload_is_refused_with_nothing_changed(worker):
    job_id = parks.enqueue()
    token = wait_for_token(job_id)
    wait_parked(job_id)
    before = snapshot(job_id)
    with pytest.raises(awa.InvalidCallback, match="payload"):
        awa.complete_external(token, {"big": "x" * 70_000})
    with pytest.raises(awa.InvalidCallback, match="payload"):
        awa.complete_external(token, {1, 2})
    with pytest.raises(awa.InvalidCallback, match=r"payload\.zero is -0\.0"):
        awa.complete_external(token, {"zero": -0.0})
    with pytest.raises(awa.InvalidCallback, match=r"payload\[0\] contains the lone surrogate"):
        awa.complete_external(token, ["\ud800"])
    assert snapshot(job_id) == before


def test_a_payload_keeps_its_floats_as_the_result(worker):
    job_id = parks.enqueue()
    token = wait_for_token(job_id)
    wait_parked(job_id)
    payload = {"amount": 1e16, "rates": [2.5e20, 0.5], "count": 10**16}
    assert awa.complete_external(token, payload) == "completed"
    assert exact_repr(awa.get_job(job_id).result) == exact_repr(payload)


def test_complete_inside_a_rolled_back_transaction_changes_nothing(worker):
    from django.db import transaction

    job_id = parks.enqueue()
    token = wait_for_token(job_id)
    wait_parked(job_id)
    before = snapshot(job_id)
    with pytest.raises(RuntimeError), transaction.atomic():
        awa.complete_external(token)
        raise RuntimeError("the webhook's own write failed")
    assert snapshot(job_id) == before
    assert awa.complete_external(token) == "completed"


# -- timeouts ----------------------------------------------------------------------------------


def test_callback_timeout_is_rescued_through_retry_then_failed():
    """The rescuer alone (no worker deadline or staleness applies to a parked attempt)."""
    with override_settings(AWA=FAST):
        worker = BackgroundWorker(maintenance=False).start()
        try:
            job_id = parks.enqueue()  # max_attempts=2
            first = wait_for_token(job_id)
            wait_parked(job_id)
            # Staleness 0: a parked attempt is never rescued for silence, only on its timeout.
            assert rescue(staleness_s=0.001).rescued == 0
            expire_callbacks()
            assert rescue().rescued == 1
            job = awa.get_job(job_id)
            assert job.state == "retryable"
            assert "callback timed out" in job.errors[-1]["message"]
            with pytest.raises(awa.StaleCallback, match="retryable"):
                awa.complete_external(first)
            # The retry runs when promoted; the promoter is a leader task, so promote by hand.
            promote_retries()
            second = wait_for_token(job_id, 2)
            wait_parked(job_id)
            expire_callbacks()
            assert rescue().rescued == 1
            job = awa.get_job(job_id)
            assert job.state == "failed"
            assert len(job.errors) == 2
            with pytest.raises(awa.StaleCallback, match="failed"):
                awa.complete_external(second)
        finally:
            worker.stop()


def test_queue_deadline_does_not_rescue_a_parked_attempt():
    queues = {"default": {"concurrency": 1, "deadline_s": 0.2}}
    with override_settings(AWA={**FAST, "QUEUES": queues}):
        worker = BackgroundWorker(maintenance=False).start()
        try:
            job_id = parks.enqueue()
            token = wait_for_token(job_id)
            wait_parked(job_id)
            wait_until(
                lambda: scalar(
                    "SELECT bool_and(deadline_at < now()) FROM awa.claim_receipts "
                    "WHERE job_id = %s",
                    [job_id],
                ),
                timeout=5,
            )
            assert rescue(staleness_s=0.001).rescued == 0
            assert awa.complete_external(token) == "completed"
        finally:
            worker.stop()


def test_stale_token_after_a_reclaim_is_rejected():
    """A token from attempt 1 cannot touch attempt 2 of the same job."""
    with override_settings(AWA=FAST):
        worker = BackgroundWorker().start()
        try:
            job_id = parks.enqueue()
            first = wait_for_token(job_id)
            wait_parked(job_id)
            awa.retry_external(first)
            second = wait_for_token(job_id, 2)
            wait_parked(job_id)
            before = snapshot(job_id)
            with pytest.raises(awa.StaleCallback, match="retryable"):
                awa.complete_external(first)
            assert snapshot(job_id) == before
            assert awa.complete_external(second) == "completed"
            assert len(tokens(job_id)) == 2
            assert len(notes(job_id)) == 2
        finally:
            worker.stop()


def test_cancel_closes_a_parked_attempt_and_its_token_goes_stale(worker):
    job_id = parks.enqueue()
    token = wait_for_token(job_id)
    wait_parked(job_id)
    assert awa.cancel(job_id, reason="customer gave up")
    assert state(job_id) == "cancelled"
    with pytest.raises(awa.StaleCallback, match="cancelled"):
        awa.complete_external(token)


def test_exhausted_callbacks_on_a_dlq_queue_land_in_the_dlq():
    """Timeout rescue and external failure close through the same path as a worker, so a
    DLQ-enabled queue's routing applies to both."""
    queues = {"default": {"concurrency": 2, "dlq": True}}
    with override_settings(AWA={**FAST, "QUEUES": queues}):
        worker = BackgroundWorker(maintenance=False).start()
        try:
            timed_out = parks.enqueue()  # max_attempts=2
            failed = parks.enqueue()
            for job_id in (timed_out, failed):
                wait_for_token(job_id)
                wait_parked(job_id)
            expire_callbacks()
            assert rescue().rescued == 2
            promote_retries()
            second = wait_for_token(failed, 2)
            wait_for_token(timed_out, 2)
            wait_parked(timed_out)
            wait_parked(failed)
            assert awa.fail_external(second, "provider gave up") == "failed"
            scalar(
                "UPDATE awa.leases SET callback_timeout_at = now() - interval '1 second' "
                "WHERE job_id = %s RETURNING 1",
                [timed_out],
            )
            assert rescue().rescued == 1
        finally:
            worker.stop()
    for job_id, message in ((timed_out, "callback timed out"), (failed, "provider gave up")):
        entry = awa.dlq.get(job_id)
        assert entry is not None
        assert entry.dlq_reason == "attempts_exhausted"
        assert message in entry.errors[-1]["message"]
        assert state(job_id) == "dlq"


def test_a_parked_unique_job_keeps_its_key(worker):
    # waiting_external is a running attempt: its unique key stays held, and the sweeper keeps
    # the claim, until the callback resolves it.
    active = awa.Unique(states=awa.Unique.ACTIVE_STATES)
    holder = awa.enqueue(parks, unique=active)
    token = wait_for_token(holder)
    wait_parked(holder)
    assert state(holder) == "waiting_external"
    assert sweep() == 0
    with pytest.raises(awa.UniqueConflict) as raised:
        awa.enqueue(parks, unique=active)
    assert raised.value.job_id == holder

    assert awa.complete_external(token) == "completed"
    assert awa.enqueue(parks, unique=active) != holder
