"""``awa_worker --reload``: a code change restarts the worker, after in-flight jobs finish, and
the restarted worker runs the new code."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings

import awa_django as awa
from tests.conftest import REPO_ROOT, wait_until
from tests.jobs import sleepy

JOB_MODULE = """
import awa_django as awa
from tests.jobs import record_run

VERSION = "{version}"


@awa.job(kind="reload.hello")
def hello(ctx):
    record_run(ctx, f"hello {{VERSION}}")
"""


def notes() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT note FROM tests_job_runs ORDER BY id")
        return [note for (note,) in cursor.fetchall()]


def write_module(path: Path, version: str, mtime: float) -> None:
    path.write_text(JOB_MODULE.format(version=version))
    # StatReloader compares modification times; make the change visible whatever the
    # filesystem's timestamp resolution.
    os.utime(path, (mtime, mtime))


def test_editing_a_job_module_restarts_the_worker_after_draining(worker_process, tmp_path):
    module = tmp_path / "awa_reload_jobs.py"
    write_module(module, "v1", time.time() - 10)
    worker = worker_process(
        "--reload",
        "--queue",
        "default",
        env={
            "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO_ROOT}",
            "AWA_JOB_MODULES": "tests.jobs,awa_reload_jobs",
            "AWA_OVERRIDES": '{"POLL_INTERVAL_S": 0.2}',
        },
    ).wait_ready(60)

    # Only the worker imports the module: to this process its kind is another's.
    external = override_settings(AWA={**settings.AWA, "EXTERNAL_KINDS": ["reload.*"]})
    with external:
        awa.enqueue("reload.hello", args={})
    wait_until(lambda: "hello v1" in notes(), timeout=30)
    # Django's StatReloader polls once a second and takes a file's first modification time as
    # its baseline: give it time to record the module's before changing it.
    time.sleep(3)
    in_flight = sleepy.enqueue(seconds=8.0)
    wait_until(lambda: "sleepy-start" in notes(), timeout=30)

    write_module(module, "v2", time.time() + 5)

    try:
        wait_until(lambda: worker.output.count("worker ready") == 2, timeout=90)
    except AssertionError:
        raise AssertionError(f"no restart seen; worker output:\n{worker.output}") from None
    assert "awa_reload_jobs.py changed: draining in-flight jobs" in worker.output
    assert "draining in-flight jobs count=1" in worker.output
    job = awa.get_job(in_flight)
    # Drained, not abandoned: the job finished its only attempt before the restart.
    assert (job.state, job.attempt) == ("completed", 1)
    assert "sleepy-end" in notes()
    with external:
        awa.enqueue("reload.hello", args={})
    wait_until(lambda: "hello v2" in notes(), timeout=30)

    worker.proc.send_signal(signal.SIGTERM)
    assert worker.wait(60) == 0
    assert "abandoning" not in worker.output


def test_reload_is_refused_in_burst_mode(worker_process):
    worker = worker_process("--burst", "--reload")

    assert worker.wait(60) != 0
    assert "--reload cannot be combined with --burst" in worker.output


@pytest.mark.parametrize(("debug", "expected"), [("true", True), ("false", False)])
def test_reload_defaults_to_debug(worker_process, debug, expected):
    worker = worker_process("--queue", "default", env={"DEBUG": debug}).wait_ready(60)

    assert ("watching for code changes" in worker.output) is expected
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.wait(60) == 0


def test_the_worker_child_stops_when_its_supervisor_is_killed(worker_process):
    worker = worker_process("--reload", "--queue", "default").wait_ready(60)
    parent = worker.proc.pid
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    assert len(children) == 1
    child = int(children[0])

    worker.kill()  # SIGKILL: the supervisor cannot forward anything

    wait_until(lambda: _has_exited(child), timeout=60)


def _has_exited(pid: int) -> bool:
    # The orphaned child is adopted by the nearest subreaper (scripts/with_postgres.py under
    # `make test`), which may reap it only later: a zombie has exited all the same.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"
