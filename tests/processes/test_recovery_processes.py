"""Recovery with real worker processes: SIGKILL mid-job, hard deadlines, leader failover."""

from __future__ import annotations

import json
import signal
from datetime import timedelta

from django.db import connection

import awa_django as awa
from tests.conftest import wait_until
from tests.jobs import record, slow_first

FAST = {
    "HEARTBEAT_INTERVAL_S": 0.2,
    "HEARTBEAT_STALENESS_S": 1.0,
    "RESCUE_INTERVAL_S": 0.2,
    "LEADER_ELECTION_INTERVAL_S": 0.2,
    "PROMOTE_INTERVAL_S": 0.1,
    "POLL_INTERVAL_S": 0.2,
    "RETRY_BACKOFF_BASE_S": 0.05,
    "RETRY_JITTER": 0,
}


def env(**overrides: object) -> dict[str, str]:
    return {"AWA_OVERRIDES": json.dumps({**FAST, **overrides})}


def notes(job_id: int) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT note FROM tests_job_runs WHERE job_id = %s ORDER BY id", [job_id])
        return [row[0] for row in cursor.fetchall()]


def completions(job_id: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM awa.done_entries WHERE job_id = %s AND outcome = 'completed'",
            [job_id],
        )
        return cursor.fetchone()[0]


def test_sigkilled_worker_job_is_rescued_and_completes_once_elsewhere(worker_process):
    doomed = worker_process("--queue", "default=2", env=env()).wait_ready()
    job_id = slow_first.enqueue(seconds=60)
    wait_until(lambda: notes(job_id) == ["slow-start"])
    # Let one heartbeat carry the checkpoint to storage before the crash.
    wait_until(lambda: awa.get_job(job_id) is not None and checkpoint_saved(job_id))
    survivor = worker_process("--queue", "default=2", env=env()).wait_ready()
    doomed.proc.send_signal(signal.SIGKILL)
    doomed.wait(10)

    wait_until(lambda: awa.get_job(job_id).state == "completed", timeout=30)
    assert notes(job_id) == ["slow-start", "resumed checkpoint={'step': 1}"]
    assert completions(job_id) == 1
    job = awa.get_job(job_id)
    assert job.attempt == 2
    assert "heartbeat stale" in job.errors[-1]["message"]
    survivor.proc.send_signal(signal.SIGTERM)
    assert survivor.wait() == 0
    assert "became maintenance leader" in survivor.output


def checkpoint_saved(job_id: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT checkpoint FROM awa.attempt_state WHERE job_id = %s", [job_id])
        row = cursor.fetchone()
    return row is not None and row[0] is not None


def test_job_past_its_deadline_is_rescued_and_its_late_completion_ignored(worker_process):
    queues = {"default": {"concurrency": 2, "deadline_s": 0.5}, "email": {"concurrency": 1}}
    worker = worker_process("--queue", "default=2", env=env(QUEUES=queues)).wait_ready()
    # Attempt 1 ignores the cancel flag and finishes after its deadline has passed.
    job_id = slow_first.enqueue(seconds=2.0, honour_cancel=False)
    wait_until(lambda: awa.get_job(job_id).state == "completed" and len(notes(job_id)) == 3)
    # Attempt 1 saw its cancel flag raised by the rescue (it chose to run on regardless).
    assert sorted(notes(job_id)) == [
        "resumed checkpoint={'step': 1}",
        "slow-cancelled",
        "slow-start",
    ]
    wait_until(lambda: "stale completion ignored" in worker.output, timeout=10)
    assert completions(job_id) == 1
    assert "hard deadline exceeded" in awa.get_job(job_id).errors[-1]["message"]
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.wait() == 0


def test_killing_the_leader_hands_maintenance_to_another_worker(worker_process):
    first = worker_process("--queue", "default=1", env=env()).wait_ready()
    wait_until(lambda: "became maintenance leader" in first.output)
    second = worker_process("--queue", "default=1", env=env()).wait_ready()
    first.proc.send_signal(signal.SIGKILL)
    first.wait(10)
    wait_until(lambda: "became maintenance leader" in second.output, timeout=15)
    # Promotion (a leader task) still runs: a scheduled job becomes due and completes.
    job_id = awa.enqueue(record, args={"n": 1}, run_at=timedelta(milliseconds=200))
    wait_until(lambda: awa.get_job(job_id).state == "completed", timeout=15)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.queue_ring_rotations")
        rotations_before = cursor.fetchone()[0]
    record.enqueue(n=2)
    # Rotation continues under the new leader.
    wait_until(lambda: rotation_count() > rotations_before, timeout=15)
    second.proc.send_signal(signal.SIGTERM)
    assert second.wait() == 0


def rotation_count() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.queue_ring_rotations")
        return cursor.fetchone()[0]


def test_awa_maintenance_runs_the_leader_alone(worker_process):
    maintenance = worker_process("--no-maintenance", "--queue", "default=1", env=env())
    maintenance.wait_ready()
    job_id = awa.enqueue(record, args={"n": 3}, run_at=timedelta(milliseconds=100))
    # With no leader anywhere, nothing promotes the scheduled job.
    assert "became maintenance leader" not in maintenance.output
    leader = worker_process(env=env(), command="awa_maintenance")
    wait_until(lambda: "became maintenance leader" in leader.output, timeout=15)
    wait_until(lambda: awa.get_job(job_id).state == "completed", timeout=15)
    for process in (maintenance, leader):
        process.proc.send_signal(signal.SIGTERM)
        assert process.wait() == 0
