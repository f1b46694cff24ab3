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


def jobs_per_claim(job_ids: list[int]) -> float:
    """The jobs of ``job_ids`` per claim that took them: a claim's receipts are the rows one
    transaction appended, so they share its ``xmin``."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*)::float / count(DISTINCT xmin::text) FROM awa.claim_receipts"
            " WHERE job_id = ANY(%s)",
            [job_ids],
        )
        (ratio,) = cursor.fetchone()
    return float(ratio)


def done(job_ids: list[int]) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.done_entries WHERE job_id = ANY(%s)", [job_ids])
        (count,) = cursor.fetchone()
    return int(count)


def test_a_fleet_with_few_slots_each_claims_more_than_one_job_at_a_time(worker_process):
    """#37: a process at concurrency 3 that claimed as soon as one slot was free took one or two
    jobs a claim, so a fleet of them draining no-op jobs paid a claim (two statements, the first
    one coming back empty while others queued at the lane), a close and their wake-ups per job
    or two. While its claims wait their turn at the lane, a process now claims once two of its
    slots are free, with one statement."""
    workers = [worker_process("--queue", "default=3", env=POLL).wait_ready() for _ in range(8)]
    wait_until(lambda: any("became maintenance leader" in w.output for w in workers))
    # Jobs of 0 to 6 ms: a process's slots free one at a time, and 24 slots claim faster than
    # one lane serves claims, so claims queue at it.
    job_ids = awa.enqueue_many("tests.nap", [{"seconds": (n % 7) / 1000} for n in range(900)])
    wait_until(lambda: done(job_ids) == len(job_ids), timeout=40)
    per_claim = jobs_per_claim(job_ids)
    print("jobs per claim", per_claim)
    # About 1.5 before (a claim per free slot, or two), about 2.2 after (two or three).
    assert per_claim >= 1.9, per_claim
