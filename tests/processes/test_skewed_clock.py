"""A real ``manage.py awa_worker`` whose wall clock runs an hour fast still retries and snoozes
on time: when a job runs again is computed by the database, from its own clock."""

from __future__ import annotations

import json
import os
import signal
from datetime import datetime

from django.db import connection

import awa_django as awa
from tests.conftest import REPO_ROOT, wait_until
from tests.jobs import always_fails, retry_after, snooze_once

SKEW_S = 3600.0
OVERRIDES = {
    "RETRY_BACKOFF_BASE_S": 0.2,
    "RETRY_JITTER": 0,
    "PROMOTE_INTERVAL_S": 0.1,
    "POLL_INTERVAL_S": 0.2,
}


def skewed_env() -> dict[str, str]:
    path = [str(REPO_ROOT / "tests" / "skewed_clock"), os.environ.get("PYTHONPATH", "")]
    return {
        "PYTHONPATH": os.pathsep.join(filter(None, path)),
        "AWA_TEST_CLOCK_SKEW_S": str(SKEW_S),
        "AWA_OVERRIDES": json.dumps(OVERRIDES),
    }


def database_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def test_a_worker_an_hour_fast_runs_retries_and_snoozes_when_they_are_due(worker_process):
    worker = worker_process("--queue", "default=4", env=skewed_env()).wait_ready()
    failing = always_fails.enqueue()  # 3 attempts, 0.2 s then 0.4 s apart
    retried = retry_after.enqueue(seconds=0.2)
    snoozed = snooze_once.enqueue()
    expected = {failing: "failed", retried: "completed", snoozed: "completed"}
    # At the worker's clock they would all wait an hour for their next attempt.
    wait_until(lambda: {j.job_id: j.state for j in awa.get_jobs(list(expected))} == expected)

    job = awa.get_job(failing)
    assert [e["attempt"] for e in job.errors] == [1, 2, 3]
    # The worker really is an hour ahead: it dates the errors it records by its own clock.
    stamped = datetime.fromisoformat(job.errors[0]["at"])
    assert 0.9 * SKEW_S < (stamped - database_now()).total_seconds() < 1.1 * SKEW_S
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.wait() == 0
