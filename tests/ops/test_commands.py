"""The operator commands: awa_queues, awa_queue, awa_dlq, awa_jobs and awa_health, through
call_command and (for exit codes) as real ``manage.py`` processes."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

import awa_django as awa
from tests.conftest import job_no_worker_knows, run_burst
from tests.jobs import noop, terminal
from tests.ops.helpers import manage

pytestmark = pytest.mark.usefixtures("awa_db")

QUEUES = {"default": {"dlq": True}, "email": {}}


@pytest.fixture(autouse=True)
def dlq_default():
    with override_settings(AWA={"QUEUES": QUEUES}):
        yield


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_awa_queues_prints_a_table_and_json():
    noop.enqueue()
    awa.enqueue(noop, queue="email", run_at=timedelta(hours=1))
    lines = run("awa_queues").splitlines()
    assert lines[0].split()[:4] == ["queue", "available", "scheduled", "retryable"]
    assert lines[1].split()[:3] == ["default", "1", "0"]
    assert lines[2].split()[:3] == ["email", "0", "1"]
    rows = {q["queue"]: q for q in json.loads(run("awa_queues", "--json"))}
    assert rows["default"]["available"] == 1 and rows["email"]["scheduled"] == 1
    assert rows["default"]["paused"] is False


def test_awa_queues_and_awa_jobs_say_which_jobs_no_worker_knows():
    waiting = job_no_worker_knows("nobody.knows")
    job_no_worker_knows("nobody.knows")
    job_no_worker_knows("nobody.either", queue="email")
    lines = run("awa_queues").splitlines()
    headers = lines[0].split()
    assert headers[3:5] == ["retryable", "unknown_kind"]
    assert lines[1].split()[3:5] == ["2", "2"] and lines[2].split()[3:5] == ["1", "1"]
    assert lines[3:] == [
        "default: 2 nobody.knows job(s) wait for a worker that knows their kind: no worker "
        "that claimed them has its handler (import its module in the workers: an installed "
        "app's jobs.py, or AWA['JOB_MODULES'])",
        "email: 1 nobody.either job(s) wait for a worker that knows their kind: no worker "
        "that claimed them has its handler (import its module in the workers: an installed "
        "app's jobs.py, or AWA['JOB_MODULES'])",
    ]
    rows = {q["queue"]: q for q in json.loads(run("awa_queues", "--json"))}
    assert rows["default"]["unknown_kinds"] == {"nobody.knows": 2}
    listed = run("awa_jobs", "list", "--kind", "nobody.knows").splitlines()
    (row,) = [line for line in listed if line.startswith(f"{waiting} ")]
    assert "retryable (no worker knows this kind)" in row


def test_awa_queue_pause_resume_and_drain_with_confirmation(monkeypatch):
    assert run("awa_queue", "pause", "default", "--by", "bob") == "paused default\n"
    assert awa.queues.stats()[0].paused_by == "bob"
    assert run("awa_queue", "resume", "default") == "resumed default\n"
    with pytest.raises(CommandError, match="unknown queue"):
        run("awa_queue", "pause", "nope")

    job_id = noop.enqueue()
    monkeypatch.setattr("builtins.input", lambda prompt: "no")
    with pytest.raises(CommandError, match="aborted"):
        run("awa_queue", "drain", "default")
    assert awa.get_job(job_id).state == "available"
    monkeypatch.setattr("builtins.input", lambda prompt: "yes")
    assert "cancelled 1" in run("awa_queue", "drain", "default")
    assert awa.get_job(job_id).state == "cancelled"
    other = noop.enqueue()
    assert "cancelled 1" in run("awa_queue", "drain", "default", "--yes")
    assert awa.get_job(other).state == "cancelled"


def test_awa_queue_concurrency_sets_and_resets_the_live_value():
    assert run("awa_queue", "concurrency", "email", "--to", "3", "--by", "bob") == (
        "email: concurrency 3 in each worker process\n"
    )
    [email] = [q for q in awa.queues.stats() if q.queue == "email"]
    assert (email.concurrency, email.concurrency_set_by) == (3, "bob")
    table = run("awa_queues").splitlines()
    assert table[0].split()[-1] == "live_concurrency"
    default_row, email_row = (line.split() for line in table[1:3])
    assert (default_row[0], default_row[-1]) == ("default", "-")
    assert (email_row[0], email_row[-2:]) == ("email", ["3", "(bob)"])
    for bad in (["--to", "0"], ["--to", "-2"], ["--to", "10001"], [], ["--to", "2", "--reset"]):
        with pytest.raises(CommandError):
            run("awa_queue", "concurrency", "email", *bad)
    with pytest.raises(CommandError, match="--to does not apply to pause"):
        run("awa_queue", "pause", "email", "--to", "2")
    assert [q.concurrency for q in awa.queues.stats() if q.queue == "email"] == [3]
    assert "configured value" in run("awa_queue", "concurrency", "email", "--reset")
    assert [q.concurrency for q in awa.queues.stats() if q.queue == "email"] == [None]


def test_awa_dlq_list_depth_retry_purge_and_move_failed():
    dead = [awa.enqueue(terminal) for _ in range(3)]
    failed = awa.enqueue(terminal, queue="email")
    run_burst()
    listed = run("awa_dlq", "list").splitlines()
    assert len(listed) == 4 and "card declined" in listed[1]
    assert json.loads(run("awa_dlq", "depth", "--json")) == {"default": 3}
    assert "total 3" in run("awa_dlq", "depth")

    with pytest.raises(CommandError, match="or --all"):
        run("awa_dlq", "retry")
    assert run("awa_dlq", "retry", str(dead[0]), "--to-queue", "email") == f"{dead[0]}: retried\n"
    assert awa.get_job(dead[0]).queue == "email"
    assert run("awa_dlq", "purge", str(dead[0])) == f"{dead[0]}: not in the DLQ\n"
    assert run("awa_dlq", "purge", "--kind", "tests.terminal", "--older-than", "3600") == (
        "purged 0 entries\n"
    )
    assert run("awa_dlq", "retry", "--queue", "default", "--run-in", "3600") == (
        "retried 2 entries\n"
    )
    assert {awa.get_job(j).state for j in dead[1:]} == {"scheduled"}

    assert run("awa_dlq", "move-failed", "--queue", "email") == "moved 1 failed jobs into the DLQ\n"
    assert awa.get_job(failed).state == "dlq"
    assert run("awa_dlq", "purge", "--all") == "purged 1 entries\n"
    assert awa.dlq.depth() == 0


def test_awa_jobs_list_dump_retry_cancel():
    done = noop.enqueue()
    failed = awa.enqueue(terminal, queue="email")
    run_burst()
    waiting = noop.enqueue()
    lines = run("awa_jobs", "list").splitlines()
    assert [line.split()[:2] for line in lines[1:]] == [
        [str(waiting), "available"],
        [str(failed), "failed"],
        [str(done), "completed"],
    ]
    assert [
        r["job_id"] for r in json.loads(run("awa_jobs", "list", "--state", "failed", "--json"))
    ] == [failed]
    dumped = json.loads(run("awa_jobs", "dump", str(failed)))
    assert dumped[0]["errors"][0]["message"] == "card declined"
    with pytest.raises(CommandError, match="no such job: 999999"):
        run("awa_jobs", "dump", "999999")

    assert run("awa_jobs", "retry", str(failed)) == f"{failed}: retried\n"
    record = awa.get_job(failed)
    assert (record.state, record.attempt, record.run_lease) == ("available", 0, 2)
    assert "not retryable" in run("awa_jobs", "retry", str(done))
    assert run("awa_jobs", "cancel", str(waiting)) == f"{waiting}: cancelled\n"
    assert run("awa_jobs", "cancel", str(done)) == f"{done}: already finished\n"
    with pytest.raises(CommandError, match="needs at least one JOB_ID"):
        run("awa_jobs", "cancel")


def test_awa_health_exit_codes(worker_process):
    unhealthy = manage("awa_health", "--json")
    assert unhealthy.returncode == 1, unhealthy.stderr
    report = json.loads(unhealthy.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert report["healthy"] is False
    assert checks["database"]["ok"] and checks["migrations"]["ok"]
    assert not checks["leader"]["ok"] and not checks["queues"]["ok"]
    assert "default" in checks["queues"]["detail"]

    fast = {
        "AWA_OVERRIDES": json.dumps(
            {"LEADER_ELECTION_INTERVAL_S": 0.1, "RUNTIME_SNAPSHOT_INTERVAL_S": 0.5}
        )
    }
    worker = worker_process(env=fast).wait_ready()  # every queue of the example settings
    healthy = manage("awa_health")
    for _ in range(50):
        if healthy.returncode == 0:
            break
        healthy = manage("awa_health")  # until the leader's snapshot says it leads
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert healthy.stdout.splitlines()[-1] == "healthy"
    worker.proc.terminate()
    assert worker.wait() == 0

    down = manage("awa_health", env={"DATABASE_URL": "postgres://postgres@127.0.0.1:1/none"})
    assert down.returncode == 1 and "FAIL database" in down.stdout
