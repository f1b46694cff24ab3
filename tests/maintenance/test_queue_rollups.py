"""The leader's compacted history (#36): the 15-second samples and the ring's closures rolled up
into 1-minute buckets per queue and per kind, those into 15-minute buckets, and both trimmed
past their kept windows; against real PostgreSQL, through the sampler's own pass."""

from __future__ import annotations

import asyncio

import pytest
from django.db import connection

import awa_django as awa
from awa_django.maintenance.queue_stats import QueueSampler, QueueStatsConfig
from awa_django.storage.connections import open_pool
from tests.conftest import run_burst
from tests.jobs import noop, record, terminal

pytestmark = pytest.mark.usefixtures("awa_db")


def run_passes(count: int = 1) -> None:
    async def main() -> None:
        pool = await open_pool("default", max_size=1)
        try:
            for _ in range(count):
                # A fresh sampler each time: each compacts in its first pass.
                await QueueSampler(pool, QueueStatsConfig(interval_s=30.0)).run_once()
        finally:
            await pool.close()

    asyncio.run(main())


def execute(sql: str, params: list[object] | None = None) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def rows(resolution_s: int) -> dict[tuple[str, str], tuple]:
    """(queue, kind) -> (bucket count, completed, failed, peak available) of a resolution."""
    found = execute(
        "SELECT queue, kind, count(*), sum(completed), sum(failed), max(available) "
        "FROM awa.queue_stat_rollups WHERE resolution_s = %s GROUP BY 1, 2",
        [resolution_s],
    )
    return {(q, k): (n, c, f, a) for q, k, n, c, f, a in found}


def test_closures_and_samples_roll_up_into_minutes_per_queue_and_per_kind():
    noop.enqueue_many([{"n": n} for n in range(5)])
    record.enqueue_many([{"n": n} for n in range(3)])
    terminal.enqueue()
    awa.enqueue(terminal, queue="email")
    run_burst()
    # Closed and sampled three minutes ago: a finished minute the pass compacts.
    execute(
        "UPDATE awa.done_entries SET finalized_at = "
        "date_trunc('minute', now() - interval '3 minutes') + interval '20 seconds'"
    )
    execute(
        "INSERT INTO awa.queue_stat_samples (queue, sampled_at, available, scheduled, retryable, "
        "running, waiting_external, dlq, lag_s, completed, failed) "
        "SELECT 'default', date_trunc('minute', now() - interval '3 minutes') + s * interval "
        "'15 seconds', 10 * s, 0, 0, 1, 0, 0, 0, 0, 0 FROM generate_series(0, 3) s"
    )
    run_passes()

    minutes = rows(60)
    assert minutes[("default", "")] == (1, 8, 1, 30)
    assert minutes[("default", "tests.noop")] == (1, 5, 0, None)
    assert minutes[("default", "tests.record")] == (1, 3, 0, None)
    assert minutes[("default", "tests.terminal")] == (1, 0, 1, None)
    assert minutes[("email", "")][1:3] == (0, 1)
    assert minutes[("email", "tests.terminal")] == (1, 0, 1, None)

    # Compacting again adds nothing: each minute is rolled up once.
    run_passes(2)
    assert rows(60) == minutes

    # The ops API reads them back, per queue or per kind.
    per_queue = awa.queues.rollups(window_s=3600)
    assert {(r.queue, r.kind) for r in per_queue} == {("default", ""), ("email", "")}
    per_kind = awa.queues.rollups(window_s=3600, per_kind=True)
    assert {(r.queue, r.kind): r.completed for r in per_kind} == {
        ("default", "tests.noop"): 5,
        ("default", "tests.record"): 3,
        ("default", "tests.terminal"): 0,
        ("email", "tests.terminal"): 0,
    }
    with pytest.raises(ValueError, match="resolution_s"):
        awa.queues.rollups(resolution_s=30)


def test_finished_quarter_hours_roll_up_and_old_buckets_are_trimmed():
    # Minute buckets of the quarter hour that ended before the last one: 15 minutes of 2
    # completions each, depths rising to 14; the minutes rolled up into the present quarter
    # (its first minute: any later one is, in its quarter's last minute, a whole quarter's
    # worth, and a minute before now is, in a quarter's first minute, the finished quarter's).
    execute(
        "WITH b AS (SELECT date_bin('15 minutes', now(), timestamptz '2000-01-01 00:00:00+00')"
        " AS q) "
        "INSERT INTO awa.queue_stat_rollups (resolution_s, queue, kind, bucket_at, completed, "
        "failed, available, scheduled, retryable, running, dlq) "
        "SELECT 60, 'default', '', q - interval '30 minutes' + m * interval '1 minute', 2, "
        "m % 2, m, 0, 0, 0, 0 FROM generate_series(0, 14) m, b "
        "UNION ALL SELECT 60, 'default', '', q, 0, 0, 0, 0, 0, 0, 0 FROM b"
    )
    # Past their windows: a minute bucket 26 hours old, a quarter-hour one 9 days old.
    execute(
        "INSERT INTO awa.queue_stat_rollups (resolution_s, queue, kind, bucket_at, completed, "
        "failed) VALUES (60, 'old', '', now() - interval '26 hours', 1, 0), "
        "(900, 'old', '', now() - interval '9 days', 1, 0)"
    )
    run_passes()

    quarters = rows(900)
    assert quarters[("default", "")] == (1, 30, 7, 14)
    assert ("old", "") not in rows(60) and ("old", "") not in quarters
    run_passes()
    assert rows(900) == quarters
