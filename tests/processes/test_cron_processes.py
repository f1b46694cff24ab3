"""Cron under real ``manage.py awa_maintenance`` processes: a leader killed in the middle of a
fire, and its successor, enqueue every tick of a per-second schedule exactly once."""

from __future__ import annotations

import itertools
import json
from datetime import datetime, timedelta

import psycopg
from django.db import connection

from tests.conftest import subprocess_database_url as database_url
from tests.conftest import wait_until

SCHEDULE = "tests.every_second"
OVERRIDES = {
    "CRON": [
        {"name": SCHEDULE, "schedule": "* * * * * *", "job": "tests.noop", "missed": "catch_up"}
    ],
    "CRON_INTERVAL_S": 0.2,
    "LEADER_ELECTION_INTERVAL_S": 0.2,
}


def fired_ticks() -> list[datetime]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT metadata -> 'awa_cron' ->> 'fire_at' FROM awa.jobs "
            "WHERE metadata -> 'awa_cron' ->> 'name' = %s",
            [SCHEDULE],
        )
        return sorted(datetime.fromisoformat(row[0]) for row in cursor.fetchall())


def lock_waiters(conn: psycopg.Connection) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock'"
    ).fetchone()
    return int(row[0]) if row else 0


def test_leader_killed_mid_fire_every_tick_enqueued_exactly_once(worker_process):
    env = {"AWA_OVERRIDES": json.dumps(OVERRIDES)}
    old = worker_process(command="awa_maintenance", env=env).wait_ready()
    wait_until(lambda: "became maintenance leader" in old.output)
    new = worker_process(command="awa_maintenance", env=env).wait_ready()
    wait_until(lambda: len(fired_ticks()) >= 2, timeout=30)

    with psycopg.connect(database_url(), autocommit=True) as blocker, blocker.transaction():
        # Hold the schedule's row: the leader's next fire stops inside its compare-and-swap.
        blocker.execute("SELECT 1 FROM awa.cron_jobs WHERE name = %s FOR UPDATE", [SCHEDULE])
        wait_until(lambda: lock_waiters(blocker) >= 1, timeout=30)
        old.kill()  # failover in the middle of an evaluation
        wait_until(lambda: "became maintenance leader" in new.output, timeout=30)
        # The successor read the same row and now waits behind it too (the killed leader's
        # backend may still be queued there, and may still commit once the lock is free).
        wait_until(lambda: lock_waiters(blocker) >= 2, timeout=30)
        held_until = datetime.now().astimezone()
        wait_until(lambda: datetime.now().astimezone() > held_until + timedelta(seconds=2))
    released_at = datetime.now().astimezone()
    wait_until(lambda: fired_ticks()[-1] > released_at + timedelta(seconds=2), timeout=30)
    new.kill()

    ticks = fired_ticks()
    assert len(ticks) == len(set(ticks)), "a tick was enqueued twice"
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert set(gaps) == {timedelta(seconds=1)}, "a tick was lost"
    assert ticks[0] < held_until - timedelta(seconds=1) < ticks[-1]
