"""The pure mapping from a handler result to a storage transition, and the backoff policy."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import awa_django as awa
from awa_django.core.claimed_job import ClaimedJob
from awa_django.core.completion import result_to_completion
from awa_django.core.handler_result import HandlerResult
from awa_django.core.outcome import Outcome
from awa_django.core.retry import RetryPolicy

NOW = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = RetryPolicy(base_s=1.0, max_s=60.0, jitter=0.25)


def claimed(attempt: int = 1, max_attempts: int = 5) -> ClaimedJob:
    return ClaimedJob(
        queue="default",
        priority=2,
        shard=0,
        lane_seq=10,
        ready_slot=3,
        job_id=7,
        kind="k",
        args={},
        attempt=attempt,
        run_lease=attempt,
        max_attempts=max_attempts,
        run_at=NOW,
        created_at=NOW,
        metadata={},
        tags=[],
        errors=[],
    )


def map_result(error: BaseException | None, **job_kwargs: int):
    return result_to_completion(
        claimed(**job_kwargs), HandlerResult(error), now=NOW, policy=POLICY, rng=lambda: 0.0
    )


def test_return_completes():
    completion = map_result(None)
    assert completion.outcome is Outcome.COMPLETED
    assert (completion.job_id, completion.run_lease, completion.ready_slot) == (7, 1, 3)
    assert completion.error is None


def test_exception_retries_with_backoff_that_grows():
    delays = [map_result(ValueError("x"), attempt=a).delay_s for a in (1, 2, 3, 4)]
    assert delays == [1.0, 2.0, 4.0, 8.0]
    assert map_result(ValueError("x"), attempt=2).outcome is Outcome.RETRYABLE


def test_backoff_is_capped_and_jittered_within_bounds():
    assert POLICY.backoff_seconds(30, lambda: 0.0) == 60.0
    assert POLICY.backoff_seconds(30, lambda: 1.0) == 75.0
    assert 2.0 <= POLICY.backoff_seconds(2, lambda: 0.5) <= 2.5


def test_exhausted_attempts_fail_with_the_error():
    completion = map_result(ValueError("last straw"), attempt=5, max_attempts=5)
    assert completion.outcome is Outcome.FAILED
    assert completion.error["message"] == "last straw"
    assert completion.error["type"] == "builtins.ValueError"
    assert completion.error["attempt"] == 5
    assert "last straw" in completion.error["traceback"]


def test_retry_after_uses_its_delay_and_an_attempt():
    completion = map_result(awa.RetryAfter(30))
    assert completion.outcome is Outcome.RETRYABLE
    assert completion.delay_s == 30
    assert map_result(awa.RetryAfter(30), attempt=5, max_attempts=5).outcome is Outcome.FAILED


def test_snooze_reschedules_without_error():
    completion = map_result(awa.Snooze(12), attempt=5, max_attempts=5)
    assert completion.outcome is Outcome.SNOOZED
    assert completion.delay_s == 12
    assert completion.error is None


def test_cancel_records_reason():
    completion = map_result(awa.Cancel("no longer needed"))
    assert completion.outcome is Outcome.CANCELLED
    assert completion.error["reason"] == "no longer needed"


def test_terminal_error_fails_at_once():
    class Declined(awa.TerminalError):
        pass

    completion = map_result(Declined("card declined"), attempt=1, max_attempts=25)
    assert completion.outcome is Outcome.FAILED
    assert completion.error["message"] == "card declined"


def test_unknown_kind_fails_at_once():
    completion = map_result(awa.UnknownJobKind("unknown job kind 'x'"), attempt=1, max_attempts=25)
    assert completion.outcome is Outcome.FAILED
    assert "unknown job kind" in completion.error["message"]


@pytest.mark.parametrize("bad", [-1, -0.5])
def test_negative_delays_are_rejected(bad):
    with pytest.raises(ValueError):
        awa.RetryAfter(bad)
    with pytest.raises(ValueError):
        awa.Snooze(bad)
