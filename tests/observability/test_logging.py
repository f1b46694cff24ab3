"""Logs an operator can read: exactly one ``job finished`` line per finished attempt, with kind,
id, outcome and duration as fields; outcomes the handler asked for at INFO without a traceback,
a failure that will be retried at WARNING without one, the failure that ends a job at ERROR
with its traceback; ``job started`` only at ``-v 3``; and ``awa_worker --log-format json``
printing the same as one parseable JSON object per line."""

from __future__ import annotations

import json
import logging
import re
from collections import Counter

import pytest
from django.test import override_settings

import awa_django as awa
from tests.conftest import run_burst, wait_until
from tests.jobs import always_fails, cancels, cooperative, noop, retry_after, snooze_once, terminal

pytestmark = pytest.mark.usefixtures("awa_db")

FAST = {"RETRY_BACKOFF_BASE_S": 0.05, "RETRY_JITTER": 0, "PROMOTE_INTERVAL_S": 0.1}
# A text line as the command's own handler prints it: time, level, logger, message.
TEXT_LINE = re.compile(r"^\S+ \S+ (?P<level>[A-Z]+) (?P<logger>\S+): (?P<message>.*)$")
MESSAGE_FIELDS = re.compile(r"(\w+)=(\S+)")


def test_each_attempt_logs_one_finished_line_at_the_level_of_its_outcome(caplog):
    caplog.set_level(logging.DEBUG, logger="awa_django")
    ok = noop.enqueue()
    declined = terminal.enqueue()
    cancelled = cancels.enqueue()
    broken = awa.enqueue(always_fails, max_attempts=1)
    retried = awa.enqueue(always_fails, max_attempts=2)
    with override_settings(AWA={"QUEUES": {"default": {}}, **FAST}):
        run_burst(burst_wait_s=2)

    finished = [r for r in caplog.records if r.getMessage().startswith("job finished")]
    per_attempt = Counter((r.job_id, r.run_lease) for r in finished)
    assert set(per_attempt.values()) == {1}
    by_job = {(r.job_id, r.attempt): r for r in finished}

    line = by_job[(ok, 1)]
    assert (line.levelno, line.kind, line.queue, line.outcome) == (
        logging.DEBUG,
        "tests.noop",
        "default",
        "completed",
    )
    assert line.duration_ms >= 0 and line.exc_info is None
    assert f"kind=tests.noop job_id={ok} outcome=completed duration_ms=" in line.getMessage()
    for job_id, outcome in ((declined, "failed"), (cancelled, "cancelled")):
        line = by_job[(job_id, 1)]
        assert (line.levelno, line.outcome, line.exc_info) == (logging.INFO, outcome, None)
    assert "PaymentDeclined('card declined')" in by_job[(declined, 1)].error

    first = by_job[(retried, 1)]
    assert (first.levelno, first.outcome, first.exc_info) == (logging.WARNING, "retryable", None)
    for line in (by_job[(retried, 2)], by_job[(broken, 1)]):
        assert (line.levelno, line.outcome) == (logging.ERROR, "failed")
        assert line.exc_info is not None and isinstance(line.exc_info[1], RuntimeError)
    # Nothing else about these jobs is logged at WARNING or above.
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert sorted(loud, key=id) == sorted(
        [first, by_job[(retried, 2)], by_job[(broken, 1)]], key=id
    )


class Unprintable(Exception):
    def __repr__(self) -> str:
        raise RuntimeError("no repr")

    def __str__(self) -> str:
        raise RuntimeError("no str")


@awa.job(kind="tests.logging.unprintable", max_attempts=1)
def unprintable(ctx: awa.JobContext) -> None:
    raise Unprintable()


def test_an_exception_that_cannot_be_printed_still_gets_its_line(caplog):
    caplog.set_level(logging.DEBUG, logger="awa_django")
    job_id = unprintable.enqueue()
    run_burst()
    assert awa.get_job(job_id).state == "failed"
    (line,) = [r for r in caplog.records if r.getMessage().startswith("job finished")]
    assert (line.levelno, line.error) == (logging.ERROR, "<Unprintable: repr() failed>")


def finished_lines(output: str, log_format: str) -> list[dict[str, object]]:
    """The ``job finished`` lines of a worker's output as dicts: level, logger and the job fields
    (read from the JSON object, or from the ``name=value`` pairs of a text line's message)."""
    found = []
    for line in output.splitlines():
        if log_format == "json":
            if not line.startswith("{"):
                continue
            entry = json.loads(line)
        else:
            match = TEXT_LINE.match(line)
            if match is None:
                continue
            entry = {**match.groupdict(), **dict(MESSAGE_FIELDS.findall(match["message"]))}
        if str(entry["message"]).startswith("job finished"):
            found.append(entry)
    return found


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_worker_at_v2_logs_one_readable_line_per_finished_attempt(worker_process, log_format):
    ok = noop.enqueue()
    declined = terminal.enqueue()
    cancelled = cancels.enqueue()
    snoozed = snooze_once.enqueue()
    asked_retry = retry_after.enqueue()
    broken = awa.enqueue(always_fails, max_attempts=2, args={"message": "disk full"})
    cancelled_running = cooperative.enqueue()
    worker = worker_process(
        "--burst",
        "--burst-wait",
        "2",
        "--log-format",
        log_format,
        env={"AWA_OVERRIDES": json.dumps(FAST)},
    )
    wait_until(lambda: awa.get_job(cancelled_running).state == "running", timeout=30)
    assert awa.cancel(cancelled_running)
    assert worker.wait() == 0, worker.output
    output = worker.output

    lines = finished_lines(output, log_format)
    outcomes: dict[int, list[tuple[str, str]]] = {}
    for line in lines:
        outcomes.setdefault(int(str(line["job_id"])), []).append(
            (str(line["level"]), str(line["outcome"]))
        )
        assert line["kind"] and float(str(line["duration_ms"])) >= 0
        assert line["logger"] == "awa_django.worker.job_log"
    assert outcomes == {
        ok: [("DEBUG", "completed")],
        declined: [("INFO", "failed")],
        cancelled: [("INFO", "cancelled")],
        snoozed: [("INFO", "snoozed"), ("DEBUG", "completed")],
        asked_retry: [("INFO", "retryable"), ("DEBUG", "completed")],
        broken: [("WARNING", "retryable"), ("ERROR", "failed")],
        # What the handler did once its attempt was cancelled under it: not stored.
        cancelled_running: [("DEBUG", "completed")],
    }, output
    assert "job started" not in output

    # The one traceback is the job's final failure; the stale completion that follows the cancel
    # is INFO; nothing else is a warning or an error.
    if log_format == "json":
        entries = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
        with_traceback = [e for e in entries if "exc_info" in e]
        assert [(e["job_id"], e["level"]) for e in with_traceback] == [(broken, "ERROR")]
        assert "RuntimeError: disk full on attempt 2" in with_traceback[0]["exc_info"]
        (stale,) = [e for e in entries if e["message"].startswith("stale completion ignored")]
        assert (stale["level"], stale["job_id"]) == ("INFO", cancelled_running)
        levels = Counter(e["level"] for e in entries)
    else:
        assert output.count("Traceback (most recent call last)") == 1
        tail = output.split("Traceback (most recent call last)", 1)[1]
        assert "RuntimeError: disk full on attempt 2" in tail
        (stale,) = [line for line in output.splitlines() if "stale completion ignored" in line]
        expected = f"stale completion ignored job_id={cancelled_running}"
        assert f" INFO awa_django.worker.completer: {expected}" in stale
        levels = Counter(m["level"] for m in map(TEXT_LINE.match, output.splitlines()) if m)
    assert (levels["WARNING"], levels["ERROR"]) == (1, 1), output


def test_v3_adds_the_start_of_each_attempt(worker_process):
    job_id = noop.enqueue()
    worker = worker_process("--burst", "-v", "3", "--log-format", "json")
    assert worker.wait() == 0, worker.output
    entries = [json.loads(line) for line in worker.output.splitlines() if line.startswith("{")]
    (started,) = [e for e in entries if e["message"].startswith("job started")]
    assert (started["level"], started["job_id"], started["kind"]) == ("TRACE", job_id, "tests.noop")
    assert [e["outcome"] for e in entries if e["message"].startswith("job finished")] == [
        "completed"
    ]
