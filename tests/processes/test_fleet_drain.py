"""A fleet of worker processes on one queue shares a burst of work (issue #37): claims skip a
lane whose claim lock another process holds, and each process that came back empty used to
sleep until its poll interval (here 30 s) while one process ran the whole burst. Now a claim
after a notification or a full claim waits its turn at the lane (worker/dispatcher.py,
``_claim_in_turn``), so every process keeps working."""

from __future__ import annotations

import json
from collections import Counter

from django.db import connection

import awa_django as awa
from tests.conftest import wait_until

POLL = {"AWA_OVERRIDES": json.dumps({"POLL_INTERVAL_S": 30})}
WORKERS = 3
JOBS = 30


def runs_by_process() -> Counter[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT note FROM tests_job_runs")
        return Counter(note for (note,) in cursor.fetchall())


def test_every_process_of_a_fleet_works_a_burst(worker_process):
    workers = [
        worker_process("--queue", "default=1", env=POLL).wait_ready() for _ in range(WORKERS)
    ]
    wait_until(lambda: any("became maintenance leader" in w.output for w in workers))
    # One commit, so one notification: every process claims once at the same time, and only
    # one of them can hold the lane's claim lock.
    awa.enqueue_many("tests.record_pid", [{"seconds": 0.1} for _ in range(JOBS)])
    wait_until(lambda: sum(runs_by_process().values()) == JOBS, timeout=25)
    runs = runs_by_process()
    assert set(runs) == {str(w.proc.pid) for w in workers}, runs
    # Alone, one process would have run all 30 (3 s), the others asleep for 30 s.
    assert min(runs.values()) >= 3, runs
