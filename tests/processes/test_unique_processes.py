"""Unique jobs under real concurrent producer processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.db import connection

import awa_django as awa
from tests import conftest

pytestmark = pytest.mark.usefixtures("awa_db")

# One producer: waits for the go file, then enqueues the same unique job `count` times, each
# in its own transaction, and prints every job id it was given (created or returned).
PRODUCER = """
import os, sys, time
import django
django.setup()
import awa_django as awa
count, on_conflict, go = int(sys.argv[1]), sys.argv[2], sys.argv[3]
print("READY", flush=True)
while not os.path.exists(go):
    time.sleep(0.005)
ids, conflicts = set(), 0
for _ in range(count):
    try:
        ids.add(awa.enqueue("tests.noop", args={"n": 1}, unique=awa.Unique(),
                            on_conflict=on_conflict))
    except awa.UniqueConflict as exc:
        conflicts += 1
        ids.add(exc.job_id)
print("IDS", ",".join(map(str, sorted(ids))), "CONFLICTS", conflicts, flush=True)
"""


def test_eight_producer_processes_enqueue_one_unique_job_exactly_once(tmp_path):
    go = tmp_path / "go"
    env = {
        **os.environ,
        "DATABASE_URL": conftest.subprocess_database_url(),
        "DJANGO_SETTINGS_MODULE": "example_project.settings",
        "PYTHONPATH": str(conftest.REPO_ROOT),
        # A producer imports the modules that declare the kinds it enqueues by name.
        "AWA_JOB_MODULES": "tests.jobs",
    }
    producers = [
        subprocess.Popen(
            [sys.executable, "-c", PRODUCER, "125", "return" if i % 2 else "raise", str(go)],
            cwd=conftest.REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(8)
    ]
    try:
        for producer in producers:
            assert producer.stdout is not None
            assert producer.stdout.readline().strip() == "READY"
        go.touch()  # all 8 start together: 1,000 enqueues of one key, racing
        outputs = [producer.communicate(timeout=180)[0] for producer in producers]
    finally:
        for producer in producers:
            if producer.poll() is None:
                producer.kill()
    assert all(p.returncode == 0 for p in producers), outputs
    seen = {
        line.split()[1] for out in outputs for line in out.splitlines() if line.startswith("IDS")
    }
    assert len(seen) == 1, outputs  # every producer was handed the same single job
    (job_id,) = seen
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.jobs WHERE kind = 'tests.noop'")
        assert cursor.fetchone()[0] == 1
    conflicts = sum(int(out.split("CONFLICTS")[1]) for i, out in enumerate(outputs) if i % 2 == 0)
    # The four raising producers made 500 attempts; at most one of them created the job.
    assert conflicts in (499, 500)
    assert awa.get_job(int(job_id)).state == "available"
