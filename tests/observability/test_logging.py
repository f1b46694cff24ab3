"""Structured logs: job fields on every job line, the final failure with its traceback, and
``awa_worker --log-format json`` printing one parseable JSON object per line."""

from __future__ import annotations

import json
import logging

import pytest

from tests.conftest import run_burst
from tests.jobs import noop, terminal

pytestmark = pytest.mark.usefixtures("awa_db")


def test_job_lines_carry_job_fields_and_the_final_failure_its_traceback(caplog):
    caplog.set_level(logging.DEBUG, logger="awa_django")
    ok = noop.enqueue()
    failed = terminal.enqueue()
    run_burst()

    finished = [r for r in caplog.records if r.getMessage().startswith("job finished")]
    (ok_line,) = [r for r in finished if r.job_id == ok]
    assert (ok_line.kind, ok_line.queue, ok_line.attempt, ok_line.run_lease) == (
        "tests.noop",
        "default",
        1,
        1,
    )
    assert ok_line.duration_ms >= 0

    (failure,) = [r for r in caplog.records if r.getMessage().startswith("job failed")]
    assert failure.levelno == logging.ERROR and failure.job_id == failed
    assert failure.exc_info is not None and failure.exc_info[1].args == ("card declined",)


def test_worker_json_log_format_prints_parseable_lines_with_job_fields(worker_process):
    job_id = noop.enqueue()
    process = worker_process("--burst", "--log-format", "json")
    assert process.wait() == 0, process.output
    entries = [json.loads(line) for line in process.output.splitlines() if line.startswith("{")]
    assert any(e["message"].startswith("worker ready") for e in entries), process.output
    (finished,) = [e for e in entries if e["message"].startswith("job finished")]
    assert finished["job_id"] == job_id
    assert finished["kind"] == "tests.noop"
    assert finished["level"] == "DEBUG" and finished["logger"] == "awa_django.worker.dispatcher"
