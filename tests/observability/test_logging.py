"""Logs an operator can read: exactly one ``job finished`` line per finished attempt, with kind,
id, queue, outcome, attempt and duration as fields; completed attempts and outcomes the handler
asked for at INFO without a traceback, a failure that will be retried at WARNING without one,
the failure that ends a job at ERROR with its traceback (once per identical failure);
``job started`` only at ``-v 3``; and ``awa_worker --log-format json`` printing the same as one
parseable JSON object per line."""

from __future__ import annotations

import json
import logging
import re
import signal
from collections import Counter

import pytest
from django.db import connection
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
        logging.INFO,
        "tests.noop",
        "default",
        "completed",
    )
    assert line.duration_ms >= 0 and line.exc_info is None
    assert (
        f"kind=tests.noop job_id={ok} queue=default outcome=completed attempt=1/25 duration_ms="
        in line.getMessage()
    )
    for job_id, outcome in ((declined, "failed"), (cancelled, "cancelled")):
        line = by_job[(job_id, 1)]
        assert (line.levelno, line.outcome, line.exc_info) == (logging.INFO, outcome, None)
    assert "PaymentDeclined('card declined')" in by_job[(declined, 1)].error

    first = by_job[(retried, 1)]
    assert (first.levelno, first.outcome, first.exc_info) == (logging.WARNING, "retryable", None)
    failures = [by_job[(retried, 2)], by_job[(broken, 1)]]
    for line in failures:
        assert (line.levelno, line.outcome) == (logging.ERROR, "failed")
    # The same failure (same exception type raised at the same place): the first line has the
    # traceback, the second names the job whose line has it.
    shown, again = sorted(failures, key=lambda r: r.created)
    assert shown.exc_info is not None and isinstance(shown.exc_info[1], RuntimeError)
    assert again.exc_info is None and again.traceback_as_job_id == shown.job_id
    assert f"traceback_as_job_id={shown.job_id}" in again.getMessage()
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
        assert line["kind"] and line["queue"] == "default"
        assert float(str(line["duration_ms"])) >= 0 and line["attempt"]
        assert line["logger"] == "awa_django.worker.job_log"
    assert outcomes == {
        ok: [("INFO", "completed")],
        declined: [("INFO", "failed")],
        cancelled: [("INFO", "cancelled")],
        snoozed: [("INFO", "snoozed"), ("INFO", "completed")],
        asked_retry: [("INFO", "retryable"), ("INFO", "completed")],
        broken: [("WARNING", "retryable"), ("ERROR", "failed")],
        # What the handler did once its attempt was cancelled under it: not stored.
        cancelled_running: [("INFO", "completed")],
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


def json_entries(output: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_default_worker_logs_one_info_line_per_job_and_a_summary_by_outcome(
    worker_process, log_format
):
    ok = noop.enqueue()
    dead = awa.enqueue(terminal, queue="email")
    broken = awa.enqueue(always_fails, max_attempts=1)
    settings = {**FAST, "QUEUES": {"default": {}, "email": {"dlq": True}}}
    worker = worker_process(
        "--burst",
        "-v",
        "1",
        "--log-format",
        log_format,
        env={"AWA_OVERRIDES": json.dumps(settings)},
    )
    assert worker.wait() == 0, worker.output
    assert awa.get_job(dead).state == "dlq"

    lines = {int(str(line["job_id"])): line for line in finished_lines(worker.output, log_format)}
    assert {job_id: (line["level"], line["outcome"]) for job_id, line in lines.items()} == {
        ok: ("INFO", "completed"),
        dead: ("INFO", "dlq"),
        broken: ("ERROR", "failed"),
    }, worker.output
    assert (lines[dead]["kind"], lines[dead]["queue"]) == ("tests.terminal", "email")
    for line in lines.values():
        assert float(str(line["duration_ms"])) >= 0
        assert str(line["attempt"]) in ("1", "1/1", "1/25")

    # The last line counts each outcome apart: a failure that went to the DLQ is not "failed".
    (stopped,) = [line for line in worker.output.splitlines() if "worker stopped" in line]
    if log_format == "json":
        entry = json.loads(stopped)
        counts = {k: entry[k] for k in ("claimed", "completed", "failed", "dlq", "retryable")}
        assert counts == {"claimed": 3, "completed": 1, "failed": 1, "dlq": 1, "retryable": 0}
    else:
        assert (
            "worker stopped claimed=3 completed=1 retryable=0 snoozed=0 cancelled=0 failed=1 "
            "dlq=1 stale=0 abandoned=0" in stopped
        )


def test_summary_mode_logs_one_line_per_queue_instead_of_one_per_job(worker_process):
    for _ in range(3):
        noop.enqueue()
    awa.enqueue(always_fails, max_attempts=1)
    settings = {**FAST, "JOB_LOG": "summary", "JOB_LOG_SUMMARY_INTERVAL_S": 3600}
    worker = worker_process(
        "--burst", "-v", "1", "--log-format", "json", env={"AWA_OVERRIDES": json.dumps(settings)}
    )
    assert worker.wait() == 0, worker.output
    entries = json_entries(worker.output)
    # Only the failure has a line of its own; the run's end reports the rest.
    assert [(e["level"], e["outcome"]) for e in entries if e.get("outcome")] == [
        ("ERROR", "failed")
    ]
    (summary,) = [e for e in entries if str(e["message"]).startswith("jobs finished")]
    assert summary["level"] == "INFO" and summary["queue"] == "default"
    assert (summary["completed"], summary["failed"], summary["dlq"]) == (3, 1, 0)
    assert summary["message"].startswith("jobs finished queue=default completed=3 retryable=0")


def test_a_failure_storm_logs_a_bounded_number_of_lines_with_the_count_of_the_rest(
    worker_process,
):
    jobs = 300
    awa.enqueue_many(always_fails, [{"message": "card declined"}] * jobs, max_attempts=1)
    settings = {**FAST, "JOB_LOG_FAILURES_PER_S": 2}
    worker = worker_process(
        "--burst", "-v", "0", "--log-format", "json", env={"AWA_OVERRIDES": json.dumps(settings)}
    )
    assert worker.wait() == 0, worker.output
    entries = json_entries(worker.output)
    failed = [e for e in entries if e.get("outcome") == "failed"]
    held = [e for e in entries if str(e["message"]).startswith("job lines suppressed")]
    # Every failure is either logged or counted; most are counted.
    assert len(failed) + sum(int(str(e["count"])) for e in held) == jobs
    assert held and len(failed) < jobs / 2, worker.output
    assert {(e["level"], e["kind"], e["limit_per_s"]) for e in held} == {
        ("ERROR", "tests.always_fails", 2)
    }
    # Identical failures: one traceback, the other lines name the job that has it.
    (with_traceback,) = [e for e in failed if "exc_info" in e]
    assert {e["traceback_as_job_id"] for e in failed if e is not with_traceback} == {
        with_traceback["job_id"]
    }
    # Far fewer lines than jobs in all, where each job used to print a line and its traceback.
    assert len(worker.output.splitlines()) < jobs / 2


def test_maintenance_lines_say_what_happened_in_words_one_line_per_cron_fire(worker_process):
    snoozed = snooze_once.enqueue()
    schedule = {"name": "tests.every_second", "schedule": "* * * * * *", "job": "tests.noop"}
    settings = {
        **FAST,
        "CRON": [schedule],
        "CRON_INTERVAL_S": 0.2,
        "LEADER_ELECTION_INTERVAL_S": 0.2,
    }
    worker = worker_process("-v", "1", env={"AWA_OVERRIDES": json.dumps(settings)})
    worker.wait_ready()

    def fired() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM awa.jobs WHERE kind = 'tests.noop'")
            return int(cursor.fetchone()[0])

    wait_until(lambda: fired() >= 2 and awa.get_job(snoozed).state == "completed", timeout=30)
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output
    lines = worker.output.splitlines()
    fires = [line for line in lines if "tests.every_second" in line]
    assert len(fires) == fired(), worker.output
    for line in fires:
        assert re.search(
            r" INFO awa_django.maintenance.service: maintenance cron: fired 1 schedule: "
            r"tests.every_second for \S+ \(job \d+\) duration_ms=",
            line,
        ), line
    # The snoozed job came back through the promoter, which says so.
    assert any(
        "maintenance promoter: moved 1 due job into the ready queue duration_ms=" in line
        for line in lines
    ), worker.output
    assert "Result(" not in worker.output
