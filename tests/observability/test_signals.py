"""awa's own signals: one per attempt that really closed, none for stale completions, and
``job_cancelled`` from ``awa.cancel`` only once the caller's transaction commits."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.dispatch import Signal
from django.test import override_settings

import awa_django as awa
from awa_django import signals
from awa_django.core.completion import Completion
from awa_django.core.outcome import Outcome
from awa_django.core.retry import RetryPolicy
from awa_django.declarations.jobs import DeclaredJob
from awa_django.maintenance.rescuer import RescueConfig, Rescuer
from awa_django.storage.connections import open_pool
from awa_django.worker.completer import Completer
from tests.conftest import run_burst
from tests.jobs import (
    always_fails,
    cancels,
    noop,
    retry_after,
    returns_value,
    snooze_once,
    terminal,
)
from tests.maintenance.test_rescue_rings_cancel import age_claims, claim

pytestmark = pytest.mark.usefixtures("awa_db", "storage_kinds")

FAST_RETRY = {
    "QUEUES": {"default": {"concurrency": 4}},
    "RETRY_BACKOFF_BASE_S": 0.02,
    "RETRY_JITTER": 0,
    "POLL_INTERVAL_S": 0.1,
    "PROMOTE_INTERVAL_S": 0.05,
}
SIGNALS = {
    "completed": signals.job_completed,
    "retried": signals.job_retried,
    "snoozed": signals.job_snoozed,
    "failed": signals.job_failed,
    "cancelled": signals.job_cancelled,
    "rescued": signals.job_rescued,
}


@pytest.fixture
def received() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Every awa signal sent during the test, as (name, kwargs) in order."""
    events: list[tuple[str, dict[str, Any]]] = []
    receivers = []
    for name, signal in SIGNALS.items():

        def receiver(sender: Any, signal: Signal, _name: str = name, **kwargs: Any) -> None:
            assert sender is DeclaredJob
            events.append((_name, kwargs))

        signal.connect(receiver, weak=False)
        receivers.append((signal, receiver))
    yield events
    for signal, receiver in receivers:
        signal.disconnect(receiver)


def of(events: list[tuple[str, dict[str, Any]]], job_id: int) -> list[tuple[str, int]]:
    return [(name, kw["attempt"]) for name, kw in events if kw["job_id"] == job_id]


@override_settings(AWA=FAST_RETRY)
def test_worker_sends_one_signal_per_closed_attempt(received):
    ok = noop.enqueue()
    retried = retry_after.enqueue(seconds=0.05)
    snoozed = snooze_once.enqueue()
    cancelled = cancels.enqueue()
    failed_terminal = terminal.enqueue()
    exhausted = always_fails.enqueue(message="nope")
    valued = returns_value.enqueue(value={"total": 3, "items": [1.5, "x"]})
    run_burst(burst_wait_s=5)

    assert of(received, ok) == [("completed", 1)]
    assert of(received, retried) == [("retried", 1), ("completed", 2)]
    assert of(received, snoozed) == [("snoozed", 1), ("completed", 1)]
    assert of(received, cancelled) == [("cancelled", 1)]
    assert of(received, failed_terminal) == [("failed", 1)]
    assert of(received, exhausted) == [("retried", 1), ("retried", 2), ("failed", 3)]

    (completed_kwargs,) = [kw for name, kw in received if kw["job_id"] == valued]
    assert completed_kwargs == {
        "job_id": valued,
        "run_lease": 1,
        "kind": "tests.returns_value",
        "queue": "default",
        "attempt": 1,
        "result": {"total": 3, "items": [1.5, "x"]},
    }
    assert [kw["result"] for name, kw in received if kw["job_id"] == ok] == [None]
    kwargs = {name: kw for name, kw in received if kw["job_id"] == cancelled}["cancelled"]
    assert kwargs == {
        "job_id": cancelled,
        "run_lease": 1,
        "kind": "tests.cancels",
        "queue": "default",
        "attempt": 1,
        "reason": "not needed any more",
    }
    (failed_kwargs,) = [kw for name, kw in received if kw["job_id"] == failed_terminal]
    assert failed_kwargs["error"]["message"] == "card declined"
    (retried_kwargs,) = [
        kw for name, kw in received if kw["job_id"] == retried and name == "retried"
    ]
    assert retried_kwargs["error"] is not None
    # When the job runs again, as the database computed it: its RetryAfter after the closing
    # statement (which starts a moment after its transaction, whose time the closure records).
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT finalized_at FROM awa.done_entries WHERE job_id = %s AND run_lease = 1",
            [retried],
        )
        (closed_at,) = cursor.fetchone()
    late = retried_kwargs["run_at"] - (closed_at + timedelta(seconds=0.05))
    assert timedelta(0) <= late < timedelta(seconds=0.05)


def complete_with_completer(completion: Completion) -> int:
    async def main() -> int:
        pool = await open_pool("default", max_size=2)
        completer = Completer(
            pool,
            batch_size=10,
            flush_s=0.01,
            policy=RetryPolicy(base_s=0.01, max_s=1, jitter=0, unknown_kind_timeout_s=3600),
            now=lambda: datetime.now(UTC),
        )
        await completer.start()
        try:
            completer.submit(completion)
            await completer.drain()
        finally:
            await completer.stop()
            await pool.close()
        return completer.stale_count

    return asyncio.run(main())


def rescue_once() -> None:
    async def main() -> None:
        pool = await open_pool("default", max_size=2)
        try:
            await Rescuer(
                pool,
                RescueConfig(interval_s=1, staleness_s=60, batch_size=100),
                policy=RetryPolicy(base_s=0.01, max_s=1, jitter=0, unknown_kind_timeout_s=3600),
                now=lambda: datetime.now(UTC),
            ).run_once()
        finally:
            await pool.close()

    asyncio.run(main())


def test_rescue_sends_rescued_and_the_late_completion_sends_nothing(received):
    job_id = awa.enqueue("k.x", args={}, max_attempts=3)
    (job,) = claim()
    age_claims()
    rescue_once()
    assert of(received, job_id) == [("rescued", 1), ("retried", 1)]
    assert received[0][1]["reason"] == "heartbeat"
    assert received[0][1]["outcome"] == "retryable"

    # The rescued attempt's own worker reports a failure afterwards: stale, so no signal.
    stale = complete_with_completer(
        Completion.of(job, Outcome.FAILED, error={"attempt": 1, "message": "late"})
    )
    assert stale == 1
    assert of(received, job_id) == [("rescued", 1), ("retried", 1)]


def test_job_cancelled_is_sent_only_after_commit(received):
    job_id = noop.enqueue()
    with transaction.atomic():
        assert awa.cancel(job_id, reason="changed my mind")
        assert received == []  # not before the commit
    assert of(received, job_id) == [("cancelled", 0)]
    assert received[0][1]["reason"] == "changed my mind"
    assert received[0][1]["kind"] == "tests.noop"


def test_job_cancelled_is_never_sent_after_a_rollback(received):
    job_id = noop.enqueue()
    with pytest.raises(RuntimeError), transaction.atomic():
        assert awa.cancel(job_id)
        raise RuntimeError("roll back")
    assert received == []
    assert awa.get_job(job_id).state == "available"


@pytest.mark.parametrize("signal_name", ["enqueued", "cancelled"])
def test_a_raising_receiver_of_a_committed_enqueue_or_cancel_is_logged_not_raised(
    signal_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    signal = signals.job_enqueued if signal_name == "enqueued" else signals.job_cancelled
    heard: list[dict[str, Any]] = []

    def broken(sender: Any, **kwargs: Any) -> None:
        raise RuntimeError("receiver bug")

    def listening(sender: Any, **kwargs: Any) -> None:
        heard.append(kwargs)

    signal.connect(broken, weak=False)
    signal.connect(listening, weak=False)
    try:
        with caplog.at_level("ERROR", logger="django.dispatch"), transaction.atomic():
            job_id = noop.enqueue()
            if signal_name == "cancelled":
                assert awa.cancel(job_id, reason="not needed")
    finally:
        signal.disconnect(broken)
        signal.disconnect(listening)
    # The commit went through, the other receiver still heard it, and the bug was logged.
    expected_state = "cancelled" if signal_name == "cancelled" else "available"
    assert awa.get_job(job_id).state == expected_state
    assert len(heard) == 1
    assert any("receiver bug" in str(record.exc_info) for record in caplog.records)
