"""Enqueue shards and ordering keys: a queue split into several lanes per priority."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

import awa_django as awa
from awa_django.core.claimed_job import ClaimedJob, claimed_job_rows
from awa_django.core.completion import Completion
from awa_django.core.outcome import Outcome
from awa_django.exceptions import InvalidJob
from awa_django.ops.shards import get_enqueue_shards, lane_backlog, set_enqueue_shards
from awa_django.storage.connections import connect
from awa_django.storage.execution import close_attempts
from awa_django.storage.queue import ClaimRequest, claim_ready
from awa_django.storage.statement import run_async

pytestmark = pytest.mark.usefixtures("awa_db", "storage_kinds")


def claim(limit: int = 1000, aging_s: float = 0) -> list[ClaimedJob]:
    async def main() -> list[ClaimedJob]:
        async with await connect("default") as conn:
            return await run_async(
                conn,
                claim_ready(
                    ClaimRequest(queue="default", claimed_by="test", deadline_s=0, aging_s=aging_s),
                    rows=claimed_job_rows,
                    limit=limit,
                ),
            )

    return asyncio.run(main())


def close(completion: Completion) -> None:
    async def main() -> None:
        async with await connect("default") as conn:
            assert await run_async(conn, close_attempts([completion]))

    asyncio.run(main())


def shard_of(job_id: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT shard FROM awa.ready_entries WHERE job_id = %s", [job_id])
        return cursor.fetchone()[0]


def test_a_queue_has_one_shard_until_it_is_split():
    assert get_enqueue_shards("default") == 1
    assert {shard_of(awa.enqueue("k.s", args={"i": i})) for i in range(10)} == {0}
    set_enqueue_shards("default", 4)
    assert get_enqueue_shards("default") == 4
    assert get_enqueue_shards("email") == 1


def test_jobs_without_a_key_spread_over_the_shards():
    set_enqueue_shards("default", 4)
    shards = {shard_of(awa.enqueue("k.s", args={"i": i})) for i in range(60)}
    # 60 random picks over 4 shards all landing on two or fewer: probability ~1e-17.
    assert len(shards) >= 3 and shards <= {0, 1, 2, 3}


def test_an_ordering_key_pins_every_job_to_one_shard_and_batches_follow_it():
    set_enqueue_shards("default", 8)
    singles = [awa.enqueue("k.s", args={"i": i}, ordering_key="order-42") for i in range(10)]
    batch = awa.enqueue_many("k.s", [{"i": i} for i in range(5)], ordering_key="order-42")
    assert len({shard_of(job_id) for job_id in singles + batch}) == 1
    # A stable hash: other keys land elsewhere too, and the key is kept on the job.
    keys = {shard_of(awa.enqueue("k.s", args={}, ordering_key=f"k{i}")) for i in range(40)}
    assert len(keys) > 1
    assert awa.get_job(singles[0]).metadata["awa:ordering_key"] == "order-42"


def test_claimers_cover_every_shard_and_keep_fifo_within_each():
    set_enqueue_shards("default", 4)
    enqueued = [awa.enqueue("k.s", args={"i": i}, ordering_key=f"key{i % 7}") for i in range(70)]
    claimed = claim(limit=30) + claim(limit=1000)
    assert sorted(j.job_id for j in claimed) == sorted(enqueued)
    by_shard: dict[int, list[int]] = defaultdict(list)
    for job in claimed:
        by_shard[job.shard].append(job.lane_seq)
    assert len(by_shard) > 1
    for lane_seqs in by_shard.values():
        assert lane_seqs == sorted(lane_seqs)
    # Per key: claim order is enqueue order.
    position = {j.job_id: n for n, j in enumerate(claimed)}
    for key in range(7):
        ids = [job_id for i, job_id in enumerate(enqueued) if i % 7 == key]
        assert sorted(ids, key=position.__getitem__) == ids


def test_with_aging_the_longest_waiting_shard_head_is_served_first():
    set_enqueue_shards("default", 4)
    first = awa.enqueue("k.s", args={}, ordering_key="a")
    later = [awa.enqueue("k.s", args={}, ordering_key=k) for k in "bcdefgh"]
    assert any(shard_of(j) != shard_of(first) for j in later), "every key hashed to one shard"
    (job,) = claim(limit=1, aging_s=60)
    assert job.job_id == first


def test_without_aging_claims_rotate_over_the_shards_of_a_busy_queue():
    set_enqueue_shards("default", 4)
    for key in "abcdefgh":
        awa.enqueue_many("k.s", [{}] * 50, ordering_key=key)
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT shard FROM awa.ready_entries")
        with_work = {row[0] for row in cursor.fetchall()}
    assert len(with_work) > 1
    # Every claim starts at a random shard: a shard left out of 40 claims has odds below 1e-4.
    assert {j.shard for _ in range(40) for j in claim(limit=1)} == with_work


def test_bad_shard_counts_and_keys_are_rejected_and_nothing_changes():
    with pytest.raises(ValueError, match=r"shards must be an integer 1\.\.64"):
        set_enqueue_shards("default", 0)
    with pytest.raises(ValueError, match="not declared"):
        set_enqueue_shards("nope", 2)
    assert get_enqueue_shards("default") == 1
    with pytest.raises(InvalidJob, match="ordering_key") as error:
        awa.enqueue("k.s", args={}, ordering_key="")
    assert error.value.field == "ordering_key"
    with pytest.raises(InvalidJob, match="at most 200"):
        awa.enqueue("k.s", args={}, ordering_key="x" * 201)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.ready_entries")
        assert cursor.fetchone() == (0,)


def test_awa_shards_command_shows_and_sets_the_shard_count():
    out = StringIO()
    call_command("awa_shards", "default", "4", stdout=out)
    assert "queue default: 4 enqueue shard(s)" in out.getvalue()
    assert get_enqueue_shards("default") == 4
    job_id = awa.enqueue("k.s", args={}, priority=3, ordering_key="x")
    out = StringIO()
    call_command("awa_shards", "default", stdout=out)
    assert f"priority 3 shard {shard_of(job_id)}: 1 waiting" in out.getvalue()
    assert lane_backlog("default")[0].waiting == 1
    with pytest.raises(CommandError, match="shards must be"):
        call_command("awa_shards", "default", "65")


def current_shard_of(job_id: int) -> int:
    """The shard of the job's newest ready row (a retried job has one per entry)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT shard FROM awa.ready_entries WHERE job_id = %s ORDER BY lane_seq DESC LIMIT 1",
            [job_id],
        )
        return cursor.fetchone()[0]


def promote(state: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT awa.promote_due(%s, 100)", [state])
        return cursor.fetchone()[0]


def test_scheduled_retried_and_dead_lettered_jobs_reenter_their_keys_shard():
    set_enqueue_shards("default", 8)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT k FROM (SELECT 'key-' || i AS k FROM generate_series(1, 50) i) keys "
            "WHERE awa.enqueue_shard('default', k) <> 0 LIMIT 1"
        )
        (key,) = cursor.fetchone()
    expected = shard_of(awa.enqueue("k.s", args={"i": 0}, ordering_key=key))
    assert expected != 0
    claim()  # out of the way of the claims below

    # Scheduled: due now, promoted by the leader's function.
    scheduled = awa.enqueue(
        "k.s", args={"i": 1}, ordering_key=key, run_at=datetime.now(UTC) + timedelta(seconds=0.2)
    )
    time.sleep(0.3)
    assert promote("scheduled") == 1
    assert current_shard_of(scheduled) == expected

    # Retried: its attempt closed as retryable, due at once.
    (job,) = claim()
    assert job.job_id == scheduled
    close(Completion.of(job, Outcome.RETRYABLE, delay_s=0, error={"m": "x"}))
    assert promote("retryable") == 1
    assert current_shard_of(scheduled) == expected

    # Dead-lettered, then retried by an operator.
    (job,) = claim()
    close(Completion.of(job, Outcome.FAILED, error={"m": "y"}))
    assert awa.dlq.move_failed(job_ids=[scheduled]) == 1
    assert awa.dlq.retry(scheduled)
    assert current_shard_of(scheduled) == expected

    # A job without a key still re-enters on shard 0.
    plain = awa.enqueue("k.s", args={"i": 2}, run_at=datetime.now(UTC) + timedelta(seconds=0.2))
    time.sleep(0.3)
    assert promote("scheduled") == 1
    assert current_shard_of(plain) == 0
