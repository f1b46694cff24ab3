"""The pure mapping from a handler result to a storage transition, and the backoff policy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import awa_django as awa
from awa_django.core.claimed_job import ClaimedJob
from awa_django.core.completion import result_to_completion
from awa_django.core.handler_result import HandlerResult
from awa_django.core.outcome import Outcome
from awa_django.core.retry import RetryPolicy
from awa_django.core.unknown_kinds import (
    UNKNOWN_KIND_ERROR_TYPE,
    KindWait,
    kind_wait,
    waits_for_kind,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = RetryPolicy(base_s=1.0, max_s=60.0, jitter=0.25, unknown_kind_timeout_s=3600)


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


def test_an_unknown_kind_waits_without_using_its_attempt():
    # max_attempts=1: a web process deployed before its workers must not burn the only attempt.
    completion = map_result(awa.UnknownJobKind("unknown job kind 'x'"), attempt=1, max_attempts=1)
    assert completion.outcome is Outcome.SNOOZED
    assert completion.delay_s == 1.0  # RETRY_BACKOFF_BASE_S for the first try
    error = completion.error
    assert error["type"] == UNKNOWN_KIND_ERROR_TYPE
    assert error["message"].startswith("unknown job kind 'x' Tried again in 1s")
    assert "AWA['UNKNOWN_KIND_TIMEOUT_S']" in error["message"]
    assert (error["waiting_since"], error["tries"]) == (NOW.isoformat(), 1)


def test_the_wait_backs_off_up_to_a_minute_and_keeps_its_start():
    since = NOW - timedelta(seconds=100)

    def after(tries: int) -> float:
        exc = awa.UnknownJobKind("x", waiting_since=since, tries=tries)
        completion = map_result(exc)
        assert completion.outcome is Outcome.SNOOZED
        assert completion.error["waiting_since"] == since.isoformat()
        assert completion.error["tries"] == tries + 1
        return completion.delay_s

    assert [after(tries) for tries in (1, 2, 3, 6, 7, 2000)] == [2.0, 4.0, 8.0, 60.0, 60.0, 60.0]


def test_the_last_try_before_the_timeout_waits_only_what_is_left():
    since = NOW - timedelta(seconds=3595)
    completion = map_result(awa.UnknownJobKind("x", waiting_since=since, tries=30))
    assert completion.outcome is Outcome.SNOOZED
    assert completion.delay_s == pytest.approx(5.0)


def test_an_unknown_kind_fails_once_it_has_waited_the_timeout():
    since = NOW - timedelta(seconds=3600)
    completion = map_result(awa.UnknownJobKind("x", waiting_since=since, tries=70))
    assert completion.outcome is Outcome.FAILED
    assert completion.error["type"] == UNKNOWN_KIND_ERROR_TYPE
    assert (
        "for 3600s (AWA['UNKNOWN_KIND_TIMEOUT_S'] is 3600s): failed."
        in (completion.error["message"])
    )
    # No waiting_since: a retry of the failed job starts a wait of its own.
    assert completion.error["waited_s"] == 3600.0 and "waiting_since" not in completion.error
    assert kind_wait([completion.error]) is None


def test_a_zero_timeout_fails_an_unknown_kind_at_its_first_try():
    policy = RetryPolicy(base_s=1.0, max_s=60.0, jitter=0.0, unknown_kind_timeout_s=0)
    completion = result_to_completion(
        claimed(), HandlerResult(awa.UnknownJobKind("x")), now=NOW, policy=policy
    )
    assert completion.outcome is Outcome.FAILED


def test_the_wait_is_read_from_the_last_error_only():
    waiting = {"type": UNKNOWN_KIND_ERROR_TYPE, "waiting_since": NOW.isoformat(), "tries": 3}
    assert kind_wait([{"type": "ValueError"}, waiting]) == KindWait(NOW, 3)
    assert kind_wait([waiting, {"type": "builtins.ValueError"}]) is None
    assert kind_wait([]) is None
    for broken in (
        {**waiting, "waiting_since": "yesterday"},
        {**waiting, "waiting_since": "2026-01-01T00:00:00"},  # naive: no worker's clock
        {**waiting, "tries": None},
        {"type": UNKNOWN_KIND_ERROR_TYPE},
    ):
        assert kind_wait([broken]) is None
    assert waits_for_kind("retryable", [waiting]) and waits_for_kind("available", [waiting])
    assert not waits_for_kind("failed", [waiting])


@pytest.mark.parametrize("bad", [-1, -0.5])
def test_negative_delays_are_rejected(bad):
    with pytest.raises(ValueError):
        awa.RetryAfter(bad)
    with pytest.raises(ValueError):
        awa.Snooze(bad)
