"""The job log's decisions, on a clock the test moves: the outcome word (``dlq`` for a failure
the queue dead-letters), the storm limit (at most N failure lines per kind and second, then one
line with the count of the rest), tracebacks not repeated for the same failure, and the summary
mode (routine lines at DEBUG, one INFO line per queue and interval)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from awa_django.core.claimed_job import ClaimedJob
from awa_django.core.outcome import Outcome
from awa_django.exceptions import RetryAfter, UnknownJobKind
from awa_django.worker.job_log import TRACEBACK_REPEAT_S, JobLog, JobLogConfig

NOW = datetime(2026, 12, 1, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def job(job_id: int, *, kind: str = "shop.charge", queue: str = "default") -> ClaimedJob:
    return ClaimedJob(queue, 2, 0, job_id, 0, job_id, kind, {}, 1, 1, 3, NOW, NOW, {}, [], [])


def failure(message: str) -> RuntimeError:
    try:
        raise RuntimeError(message)
    except RuntimeError as exc:
        return exc


def other_failure(message: str) -> RuntimeError:
    try:
        raise RuntimeError(message)
    except RuntimeError as exc:
        return exc


@pytest.fixture(autouse=True)
def everything(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="awa_django.worker.job_log")


def finished(records: list[logging.LogRecord]) -> list[logging.LogRecord]:
    return [r for r in records if r.getMessage().startswith("job finished")]


def test_a_failure_the_queue_dead_letters_is_logged_as_dlq(caplog):
    log = JobLog(JobLogConfig(dlq_queues=frozenset({"payments"})), clock=Clock())
    log.finished(job(1, queue="payments"), failure("x"), Outcome.FAILED, 0.01)
    log.finished(job(2), failure("x"), Outcome.FAILED, 0.01)
    log.finished(job(3, queue="payments"), failure("x"), Outcome.RETRYABLE, 0.01)
    log.finished(job(4, queue="payments"), None, Outcome.COMPLETED, 0.01)
    assert [(r.job_id, r.outcome, r.levelname) for r in finished(caplog.records)] == [
        (1, "dlq", "ERROR"),
        (2, "failed", "ERROR"),
        (3, "retryable", "WARNING"),
        (4, "completed", "INFO"),
    ]
    assert "queue=payments outcome=dlq attempt=1/3" in finished(caplog.records)[0].getMessage()


def test_a_storm_logs_at_most_the_limit_per_kind_and_window_then_one_line_counting_the_rest(
    caplog,
):
    clock = Clock()
    log = JobLog(JobLogConfig(failures_per_s=3), clock=clock)
    for job_id in range(1, 11):
        log.finished(job(job_id), failure(f"{job_id}"), Outcome.RETRYABLE, 0.01)
    for job_id in range(11, 13):
        log.finished(job(job_id, kind="shop.ship"), failure("x"), Outcome.FAILED, 0.01)
    # Not failures: never held back.
    for job_id in range(13, 18):
        log.finished(job(job_id), None, Outcome.COMPLETED, 0.01)
    assert [r.job_id for r in finished(caplog.records)] == [1, 2, 3, 11, 12, 13, 14, 15, 16, 17]
    assert not [r for r in caplog.records if "suppressed" in r.getMessage()]

    clock.now += 1.0
    log.tick()
    (held,) = [r for r in caplog.records if "suppressed" in r.getMessage()]
    assert held.levelname == "WARNING"
    assert held.getMessage() == (
        "job lines suppressed kind=shop.charge count=7 retryable=7 window_s=1.0 limit_per_s=3"
    )
    assert (held.kind, held.count, held.retryable, held.limit_per_s) == ("shop.charge", 7, 7, 3)

    # A new window: three more lines, and what it holds back is reported at its end, at the
    # level of the loudest line held back.
    caplog.clear()
    for job_id in range(20, 25):
        log.finished(job(job_id), failure("x"), Outcome.FAILED, 0.01)
    log.finished(job(25), RetryAfter(5), Outcome.RETRYABLE, 0.01)
    assert [r.job_id for r in finished(caplog.records)] == [20, 21, 22]
    log.flush()
    (held,) = [r for r in caplog.records if "suppressed" in r.getMessage()]
    assert (held.levelname, held.count, held.failed, held.retryable) == ("ERROR", 3, 2, 1)


def test_the_tries_of_a_kind_no_handler_knows_are_storm_limited_too(caplog):
    log = JobLog(JobLogConfig(failures_per_s=2), clock=Clock())
    for job_id in range(1, 6):
        unknown = UnknownJobKind("unknown job kind 'shop.gone': no handler registered")
        log.finished(job(job_id, kind="shop.gone"), unknown, Outcome.SNOOZED, 0.0)
    lines = finished(caplog.records)
    assert [(r.job_id, r.levelname, r.outcome) for r in lines] == [
        (1, "WARNING", "snoozed"),
        (2, "WARNING", "snoozed"),
    ]


def test_the_same_failure_shows_its_traceback_once_per_interval(caplog):
    clock = Clock()
    log = JobLog(JobLogConfig(), clock=clock)
    log.finished(job(1), failure("card 1"), Outcome.FAILED, 0.01)
    log.finished(job(2), failure("card 2"), Outcome.FAILED, 0.01)
    log.finished(job(3), other_failure("card 3"), Outcome.FAILED, 0.01)
    log.finished(job(4, kind="shop.ship"), failure("card 4"), Outcome.FAILED, 0.01)
    clock.now += TRACEBACK_REPEAT_S
    log.finished(job(5), failure("card 5"), Outcome.FAILED, 0.01)
    log.finished(job(6), failure("card 6"), Outcome.FAILED, 0.01)
    lines = {r.job_id: r for r in finished(caplog.records)}
    with_traceback = [job_id for job_id, r in lines.items() if r.exc_info is not None]
    assert with_traceback == [1, 3, 4, 5]
    assert (lines[2].traceback_as_job_id, lines[6].traceback_as_job_id) == (1, 5)
    assert lines[2].getMessage().endswith("error=RuntimeError('card 2') traceback_as_job_id=1")
    # A retried attempt's line never has one (its traceback is stored with the job).
    log.finished(job(7), failure("card 7"), Outcome.RETRYABLE, 0.01)
    assert finished(caplog.records)[-1].exc_info is None


def test_summary_mode_counts_per_queue_and_logs_one_info_line_per_interval(caplog):
    clock = Clock()
    config = JobLogConfig(summary=True, summary_interval_s=60, dlq_queues=frozenset({"email"}))
    log = JobLog(config, clock=clock)
    for job_id in range(1, 4):
        log.finished(job(job_id), None, Outcome.COMPLETED, 0.01)
    log.finished(job(4), RetryAfter(5), Outcome.RETRYABLE, 0.01)
    log.finished(job(5), failure("x"), Outcome.RETRYABLE, 0.01)
    log.finished(job(6, queue="email"), failure("x"), Outcome.FAILED, 0.01)
    log.finished(job(7, queue="email"), None, Outcome.COMPLETED, 0.01)
    # Routine lines are DEBUG; failures keep their level.
    assert [(r.job_id, r.levelname) for r in finished(caplog.records)] == [
        (1, "DEBUG"),
        (2, "DEBUG"),
        (3, "DEBUG"),
        (4, "DEBUG"),
        (5, "WARNING"),
        (6, "ERROR"),
        (7, "DEBUG"),
    ]
    clock.now += 59
    log.tick()
    assert not [r for r in caplog.records if r.getMessage().startswith("jobs finished")]
    clock.now += 1
    log.tick()
    summaries = [r for r in caplog.records if r.getMessage().startswith("jobs finished")]
    assert [r.getMessage() for r in summaries] == [
        "jobs finished queue=default completed=3 retryable=2 snoozed=0 cancelled=0 failed=0 "
        "dlq=0 interval_s=60.0",
        "jobs finished queue=email completed=1 retryable=0 snoozed=0 cancelled=0 failed=0 "
        "dlq=1 interval_s=60.0",
    ]
    assert {r.levelname for r in summaries} == {"INFO"}
    assert (summaries[1].queue, summaries[1].dlq, summaries[1].completed) == ("email", 1, 1)

    # An interval with nothing finished logs nothing; the run's end reports what is left.
    caplog.clear()
    clock.now += 60
    log.tick()
    log.finished(job(8), None, Outcome.COMPLETED, 0.01)
    log.flush()
    assert [r.getMessage() for r in caplog.records if r.levelname == "INFO"] == [
        "jobs finished queue=default completed=1 retryable=0 snoozed=0 cancelled=0 failed=0 "
        "dlq=0 interval_s=0.0"
    ]


def test_per_job_mode_never_logs_a_summary(caplog):
    clock = Clock()
    log = JobLog(JobLogConfig(), clock=clock)
    log.finished(job(1), None, Outcome.COMPLETED, 0.01)
    clock.now += 3600
    log.tick()
    log.flush()
    assert [r.getMessage().split(" kind=")[0] for r in caplog.records] == ["job finished"]
