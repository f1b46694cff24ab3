"""Recovery with real worker processes: SIGKILL mid-job, deadlines, leader failover."""

from __future__ import annotations

import json
import signal
from datetime import timedelta

from django.db import connection

import awa_django as awa
from tests import jobs as tests_jobs
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


def runs_in_order(job_id: int) -> list[tuple[str, float]]:
    """The job's notes with the seconds since its first note, in the order they were written."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT note, extract(epoch FROM at - min(at) OVER ()) FROM tests_job_runs "
            "WHERE job_id = %s ORDER BY id",
            [job_id],
        )
        return [(note, float(seconds)) for note, seconds in cursor.fetchall()]


def overran(job_id: int) -> list[tuple[str, float]]:
    wait_until(lambda: awa.get_job(job_id).state == "failed", timeout=30)
    runs = runs_in_order(job_id)
    errors = awa.get_job(job_id).errors
    assert [e["type"] for e in errors] == ["awa_django.exceptions.DeadlineExceeded"] * 2
    assert (
        "ran past its deadline of 1s (AWA['QUEUES']['default']['deadline_s'])"
        in (errors[-1]["message"])
    )
    return runs


def test_a_sync_handler_past_its_deadline_is_stopped_before_the_job_runs_again(worker_process):
    queues = {"default": {"concurrency": 2, "deadline_s": 1.0}}
    worker = worker_process("--queue", "default=2", env=env(QUEUES=queues)).wait_ready()
    job_id = tests_jobs.overrun.enqueue(seconds=6.0)
    runs = overran(job_id)
    # Each attempt was stopped where it ran, about a second in, and closed before the next began.
    assert [note for note, _ in runs] == ["start 1", "stopped 1", "start 2", "stopped 2"]
    assert runs[1][1] < 3.0
    # The traceback shows where the handler was when it was stopped.
    assert "time.sleep(0.01)" in awa.get_job(job_id).errors[0]["traceback"]
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.wait() == 0


def test_a_sync_handler_blocked_past_its_deadline_keeps_its_job_until_it_returns(worker_process):
    queues = {"default": {"concurrency": 2, "deadline_s": 1.0}}
    worker = worker_process("--queue", "default=2", env=env(QUEUES=queues)).wait_ready()
    # One call into C for 4 s: the interrupt is raised when it returns. Meanwhile the worker
    # heartbeats the attempt and the leader (rescue every 0.2 s) leaves it alone.
    job_id = tests_jobs.overrun.enqueue(seconds=4.0, blocking=True)
    runs = overran(job_id)
    assert [note for note, _ in runs] == ["start 1", "stopped 1", "start 2", "stopped 2"]
    assert runs[1][1] >= 3.9
    assert "stale completion ignored" not in worker.output
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.wait() == 0


def test_an_async_handler_past_its_deadline_is_cancelled_before_the_job_runs_again(
    worker_process,
):
    queues = {"default": {"concurrency": 2, "deadline_s": 1.0}}
    worker = worker_process("--queue", "default=2", env=env(QUEUES=queues)).wait_ready()
    job_id = tests_jobs.overrun_async.enqueue(seconds=6.0)
    runs = overran(job_id)
    assert [note for note, _ in runs] == ["start 1", "stopped 1", "start 2", "stopped 2"]
    assert runs[1][1] < 3.0
    assert "asyncio.sleep(seconds)" in awa.get_job(job_id).errors[0]["traceback"]
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
