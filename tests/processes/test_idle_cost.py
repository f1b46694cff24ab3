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
