"""What idle worker processes cost the server (issue #37): with nothing to do, three workers on
one queue commit only a few transactions a second between them (the waiting candidate's claim
per poll interval, the others' tries of the candidate lock, the leader's passes and pings, the
snapshots), not the 40 or so they committed while every process that was not its queue's
waiting candidate claimed every 100 ms (tests/worker/test_idle_statements.py checks that it no
longer claims at all while idle)."""

from __future__ import annotations

import json
import time

from django.db import connection

from tests.conftest import wait_until

IDLE = {"AWA_OVERRIDES": json.dumps({"POLL_INTERVAL_S": 1.0})}


def commits() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        )
        return int(cursor.fetchone()[0])


def rate_over(seconds: float) -> float:
    before, started = commits(), time.monotonic()
    time.sleep(seconds)
    return (commits() - before) / (time.monotonic() - started)


def test_idle_workers_commit_few_transactions(worker_process):
    # What the server commits on this database with no worker (autovacuum, this test's reads).
    baseline = rate_over(3)
    workers = [worker_process("--queue", "default=4", env=IDLE).wait_ready() for _ in range(3)]
    wait_until(lambda: any("became maintenance leader" in w.output for w in workers))
    time.sleep(2)  # past start-up: every dispatcher has gone idle
    # Long enough for every backend's statistics to reach pg_stat_database (an idle backend
    # sends them a while after its last statement).
    rate = rate_over(12) - baseline
    print("idle transactions per second", round(rate, 1), "baseline", round(baseline, 1))
    assert rate < 20, rate


# Short intervals, so that what grows with the fleet stands out from the rest in a few seconds.
SHORT = {
    "AWA_OVERRIDES": json.dumps(
        {
            "POLL_INTERVAL_S": 0.1,
            "LEADER_ELECTION_INTERVAL_S": 0.2,
            "RUNTIME_SNAPSHOT_INTERVAL_S": 1.0,
            "RUNTIME_STALE_AFTER_S": 2.0,
        }
    )
}


def test_an_idle_fleets_lock_tries_do_not_grow_with_it(worker_process):
    """#37: five idle workers on two queues. Each non-candidate tried each queue's candidate
    lock every four poll intervals, and each non-leader the leader lock every two election
    intervals: 4 x (2 + 1) / 0.4 s = 30 tries a second. Now each process sends its tries in one
    statement per tick, a tick every 0.25 s x 5 processes at most (from the second snapshot,
    which counts them): about 4 a second for the fleet. The rest is the same either way: the
    two candidates' claims (20 a second), the leader's pings (5) and passes (about 4), the
    snapshots (5)."""
    baseline = rate_over(3)
    workers = [
        worker_process("--queue", "default=1", "--queue", "email=1", env=SHORT).wait_ready()
        for _ in range(5)
    ]
    wait_until(lambda: any("became maintenance leader" in w.output for w in workers))
    time.sleep(3)  # past start-up and every process's second snapshot
    rate = rate_over(10) - baseline
    print("idle transactions per second", round(rate, 1), "baseline", round(baseline, 1))
    assert rate < 50, rate
