"""The deploy order a new user meets: web code that enqueues a new kind is deployed minutes
before the workers that run it. Real worker processes: one of the old deploy, without the new
job module, then one of the new deploy, with it."""

from __future__ import annotations

import signal

import pytest

import awa_django as awa
from tests.conftest import wait_until
from tests.deployed_later import deployed_later

pytestmark = pytest.mark.usefixtures("awa_db")

OLD_DEPLOY = {"AWA_JOB_MODULES": "tests.jobs"}
NEW_DEPLOY = {"AWA_JOB_MODULES": "tests.jobs,tests.deployed_later"}


def test_a_job_enqueued_before_its_workers_are_deployed_runs_on_them(worker_process):
    # Its only attempt: in 0.1.0 the old worker failed it for good at once.
    job_id = deployed_later.enqueue(n=7)

    old = worker_process("--queue", "default", env=OLD_DEPLOY).wait_ready()
    wait_until(lambda: awa.get_job(job_id).errors, timeout=30)
    old.proc.send_signal(signal.SIGTERM)
    assert old.wait(60) == 0, old.output
    waiting = awa.get_job(job_id)
    assert (waiting.state, waiting.attempt, waiting.max_attempts) in {
        ("retryable", 0, 1),
        ("available", 0, 1),  # promoted again before the old worker stopped
    }
    (error,) = waiting.errors
    assert error["type"] == "awa_django.exceptions.UnknownJobKind"
    assert "unknown job kind 'tests.deployed_later'" in error["message"]
    assert "outcome=snoozed" in old.output and "UnknownJobKind" in old.output

    new = worker_process("--queue", "default", env=NEW_DEPLOY).wait_ready()
    wait_until(lambda: awa.get_job(job_id).state == "completed", timeout=60)
    new.proc.send_signal(signal.SIGTERM)
    assert new.wait(60) == 0, new.output
    done = awa.get_job(job_id)
    assert (done.attempt, done.run_lease) == (1, waiting.run_lease + 1)
