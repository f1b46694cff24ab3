"""No handler ends its worker: real ``manage.py awa_worker`` processes run handlers that raise
``KeyboardInterrupt``, ``SystemExit`` and other ``BaseException``s (sync, async, django.tasks),
and one whose handler ends the process with ``os._exit``."""

from __future__ import annotations

import json
import signal

from django.db import connection

import awa_django as awa
from tests.conftest import wait_until
from tests.jobs import record
from tests.misbehaving import (
    MODULES,
    exits_process,
    raises_base,
    raises_base_async,
    task_exits,
    task_interrupts,
)
from tests.processes.test_recovery_processes import FAST

ENV = {"AWA_JOB_MODULES": MODULES, "AWA_OVERRIDES": json.dumps(FAST)}


def notes(job_id: int) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT note FROM tests_job_runs WHERE job_id = %s ORDER BY id", [job_id])
        return [note for (note,) in cursor.fetchall()]


def test_a_handler_raising_any_base_exception_fails_its_attempt_and_the_worker_serves_on(
    worker_process,
):
    worker = worker_process("--queue", "default=2", env=ENV).wait_ready()
    expected = {
        raises_base.enqueue(what="interrupt"): "builtins.KeyboardInterrupt",
        raises_base.enqueue(what="exit"): "builtins.SystemExit",
        raises_base.enqueue(what="escape"): "tests.misbehaving.Escape",
        raises_base_async.enqueue(what="interrupt"): "builtins.KeyboardInterrupt",
        raises_base_async.enqueue(what="exit"): "builtins.SystemExit",
        raises_base_async.enqueue(what="cancelled"): "asyncio.exceptions.CancelledError",
    }
    tasks = [
        (task_exits.enqueue(), "builtins.SystemExit"),
        (task_interrupts.enqueue(), "builtins.KeyboardInterrupt"),
    ]
    expected |= {int(result.id): path for result, path in tasks}
    after = record.enqueue(n=1)

    def ended() -> bool:
        return {j.state for j in awa.get_jobs(list(expected))} == {"failed"}

    wait_until(ended, timeout=20)
    wait_until(lambda: awa.get_job(after).state == "completed")
    for job_id, error_type in expected.items():
        (error,) = awa.get_job(job_id).errors
        assert error["type"] == error_type, (job_id, error)
    for result, path in tasks:
        result.refresh()
        assert result.status.name == "FAILED"
        assert [e.exception_class_path for e in result.errors] == [path]
    assert worker.proc.poll() is None, worker.output
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output


def test_a_handler_that_ends_its_process_is_rescued_and_runs_again_on_another_worker(
    worker_process,
):
    doomed = worker_process("--queue", "default=2", env=ENV).wait_ready()
    job_id = exits_process.enqueue()
    assert doomed.wait(timeout=20) == 7
    survivor = worker_process("--queue", "default=2", env=ENV).wait_ready()
    wait_until(lambda: awa.get_job(job_id).state == "completed", timeout=30)
    assert notes(job_id) == ["attempt 1", "attempt 2"]
    job = awa.get_job(job_id)
    assert job.attempt == 2
    assert job.errors[-1]["type"] == "awa_django.exceptions.AttemptRescued"
    assert "heartbeat stale" in job.errors[-1]["message"]
    survivor.proc.send_signal(signal.SIGTERM)
    assert survivor.wait() == 0
