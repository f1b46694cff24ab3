"""Unique jobs against real PostgreSQL: conflicts, on_conflict="return", release when the holder
leaves its covered states (completion, failure, cancel, prune), period buckets, batches and
cancel by key. Concurrent producers race in tests/processes/test_unique_processes.py."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

import awa_django as awa
from awa_django.maintenance.unique_sweeper import UniqueClaimSweeper, UniqueSweepConfig
from awa_django.storage.connections import open_pool
from tests.conftest import run_burst
from tests.jobs import always_fails, record, unique_record
from tests.maintenance.test_rescue_rings_cancel import claim, complete, rings

pytestmark = pytest.mark.usefixtures("awa_db", "storage_kinds")

ACTIVE = awa.Unique(states=awa.Unique.ACTIVE_STATES)


def count_jobs(kind: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.jobs WHERE kind = %s", [kind])
        return cursor.fetchone()[0]


def test_duplicate_raises_with_the_holder_id():
    first = awa.enqueue(record, args={"n": 1}, unique=awa.Unique())
    with pytest.raises(awa.UniqueConflict) as raised:
        awa.enqueue(record, args={"n": 1}, unique=awa.Unique())
    assert raised.value.job_id == first
    assert str(first) in str(raised.value)
    assert awa.enqueue(record, args={"n": 2}, unique=awa.Unique()) != first
    assert count_jobs("tests.record") == 2


def test_on_conflict_return_gives_the_existing_job():
    first = awa.enqueue(record, args={"n": 1}, unique=awa.Unique())
    assert awa.enqueue(record, args={"n": 1}, unique=awa.Unique(), on_conflict="return") == first
    assert count_jobs("tests.record") == 1


def test_a_unique_job_deduplicates_its_own_enqueue():
    first = unique_record.enqueue(n=3)
    with pytest.raises(awa.UniqueConflict):
        unique_record.enqueue(n=3)
    assert awa.enqueue(unique_record, args={"n": 3}, on_conflict="return") == first


def test_a_conflict_inside_a_transaction_leaves_it_usable():
    first = awa.enqueue(record, args={"n": 1}, unique=awa.Unique())
    with transaction.atomic():
        with pytest.raises(awa.UniqueConflict):
            awa.enqueue(record, args={"n": 1}, unique=awa.Unique())
        other = awa.enqueue(record, args={"n": 9})
    assert awa.get_job(other).state == "available"
    assert awa.get_job(first).state == "available"


def test_a_rolled_back_enqueue_leaves_the_key_free():
    with pytest.raises(RuntimeError), transaction.atomic():
        awa.enqueue(record, args={"n": 1}, unique=awa.Unique())
        raise RuntimeError("business rollback")
    job_id = awa.enqueue(record, args={"n": 1}, unique=awa.Unique())
    assert awa.get_job(job_id).state == "available"


def test_a_scheduled_job_holds_its_key():
    first = awa.enqueue(record, args={}, run_at=timedelta(hours=1), unique=awa.Unique())
    assert awa.get_job(first).state == "scheduled"
    assert awa.enqueue(record, args={}, unique=awa.Unique(), on_conflict="return") == first


def test_active_states_release_the_key_on_completion():
    first = awa.enqueue(record, args={}, unique=ACTIVE)
    run_burst()
    assert awa.get_job(first).state == "completed"
    second = awa.enqueue(record, args={}, unique=ACTIVE)
    assert second != first


def test_default_states_keep_a_completed_job_s_key_until_its_history_is_pruned():
    first = awa.enqueue("k.p", args={}, unique=awa.Unique())
    (job,) = claim()
    complete(job)
    assert awa.get_job(first).state == "completed"
    with pytest.raises(awa.UniqueConflict):
        awa.enqueue("k.p", args={}, unique=awa.Unique())
    assert rings(completed_retention_s=3600).queue_prune == "retention"  # sealed, still kept
    with pytest.raises(awa.UniqueConflict):
        awa.enqueue("k.p", args={}, unique=awa.Unique())
    assert rings(completed_retention_s=0).queue_prune == "pruned"
    assert awa.get_job(first) is None
    second = awa.enqueue("k.p", args={}, unique=awa.Unique())
    assert second != first and awa.get_job(second).state == "available"


def test_a_failed_job_releases_the_default_key():
    first = awa.enqueue(always_fails, args={}, max_attempts=1, unique=awa.Unique())
    run_burst()
    assert awa.get_job(first).state == "failed"
    assert awa.enqueue(always_fails, args={}, max_attempts=1, unique=awa.Unique()) != first


def test_a_states_mask_covering_failed_keeps_the_key():
    covering = awa.Unique(states=["available", "running", "failed"])
    first = awa.enqueue(always_fails, args={}, max_attempts=1, unique=covering)
    run_burst()
    assert awa.enqueue(always_fails, args={}, unique=covering, on_conflict="return") == first


def test_cancel_unique_cancels_the_holder_and_frees_the_key():
    first = awa.enqueue(record, args={"n": 4}, unique=awa.Unique())
    assert awa.cancel_unique(record, args={"n": 4}, unique=awa.Unique()) == first
    assert awa.get_job(first).state == "cancelled"
    assert awa.cancel_unique(record, args={"n": 4}, unique=awa.Unique()) is None
    assert awa.cancel_unique(record, args={"n": 5}, unique=awa.Unique()) is None
    assert awa.enqueue(record, args={"n": 4}, unique=awa.Unique()) != first


def test_cancel_unique_uses_the_job_s_own_options_and_needs_some():
    first = unique_record.enqueue(n=1)
    assert awa.cancel_unique(unique_record, args={"n": 1}) == first
    with pytest.raises(awa.InvalidJob) as raised:
        awa.cancel_unique(record, args={"n": 1})
    assert raised.value.field == "unique"


def test_period_buckets_allow_one_job_per_window(monkeypatch):
    hourly = awa.Unique(by_args=False, period=timedelta(hours=1))
    clock = {"now": datetime(2026, 5, 1, 10, 10, tzinfo=UTC)}
    monkeypatch.setattr(timezone, "now", lambda: clock["now"])
    first = awa.enqueue(record, args={"n": 1}, unique=hourly)
    clock["now"] = datetime(2026, 5, 1, 10, 59, tzinfo=UTC)
    assert awa.enqueue(record, args={"n": 2}, unique=hourly, on_conflict="return") == first
    clock["now"] = datetime(2026, 5, 1, 11, 0, tzinfo=UTC)
    second = awa.enqueue(record, args={"n": 3}, unique=hourly)
    assert second != first
    with connection.cursor() as cursor:
        cursor.execute("SELECT job_id, expires_at FROM awa.unique_claims ORDER BY job_id")
        assert cursor.fetchall() == [
            (first, datetime(2026, 5, 1, 11, 0, tzinfo=UTC)),
            (second, datetime(2026, 5, 1, 12, 0, tzinfo=UTC)),
        ]


def test_by_queue_separates_queues():
    per_queue = awa.Unique(by_queue=True)
    first = awa.enqueue(record, args={}, queue="default", unique=per_queue)
    assert awa.enqueue(record, args={}, queue="email", unique=per_queue) != first
    across = awa.Unique()
    held = awa.enqueue(record, args={"n": 1}, queue="default", unique=across)
    with pytest.raises(awa.UniqueConflict):
        awa.enqueue(record, args={"n": 1}, queue="email", unique=across)
    assert count_jobs("tests.record") == 3 and held


def test_enqueue_many_returns_holders_and_batch_duplicates():
    held = awa.enqueue(record, args={"n": 1}, unique=awa.Unique())
    ids = awa.enqueue_many(
        record,
        [{"n": 1}, {"n": 2}, {"n": 2}, {"n": 3}],
        unique=awa.Unique(),
        on_conflict="return",
    )
    assert ids[0] == held and ids[1] == ids[2] and len(set(ids)) == 3
    assert count_jobs("tests.record") == 3
    assert awa.enqueue_many(record, [{"n": 3}], unique=awa.Unique(), on_conflict="return") == [
        ids[3]
    ]


def test_enqueue_many_conflict_raises_and_writes_nothing():
    held = awa.enqueue(record, args={"n": 1}, unique=awa.Unique())
    with pytest.raises(awa.UniqueConflict) as raised:
        awa.enqueue_many(record, [{"n": 7}, {"n": 1}], unique=awa.Unique())
    assert raised.value.job_id == held
    with pytest.raises(awa.InvalidJob) as invalid:
        awa.enqueue_many(record, [{"n": 8}, {"n": 8}], unique=awa.Unique())
    assert invalid.value.field == "args_list[1]"
    assert count_jobs("tests.record") == 1


def test_enqueue_many_of_scheduled_unique_jobs():
    ids = awa.enqueue_many(
        record, [{"n": 1}, {"n": 2}], run_at=timedelta(hours=1), unique=awa.Unique()
    )
    assert [awa.get_job(i).state for i in ids] == ["scheduled", "scheduled"]
    with pytest.raises(awa.UniqueConflict):
        awa.enqueue(record, args={"n": 2}, unique=awa.Unique())


@pytest.mark.parametrize(
    ("options", "field"),
    [({"on_conflict": "ignore"}, "on_conflict"), ({"unique": {"by_args": True}}, "unique")],
)
def test_bad_unique_options_name_the_field(options, field):
    with pytest.raises(awa.InvalidJob) as raised:
        awa.enqueue(record, args={}, **options)
    assert raised.value.field == field
    assert count_jobs("tests.record") == 0


def test_enqueue_on_commit_drops_a_duplicate_quietly():
    first = unique_record.enqueue(n=6)
    with transaction.atomic():
        duplicate = unique_record.enqueue_on_commit(n=6)
    assert count_jobs("tests.unique_record") == 1 and first
    # The handle names the job that holds the key.
    assert duplicate.job_id == first


def sweep() -> int:
    async def main() -> int:
        pool = await open_pool("default", max_size=2)
        try:
            return (
                await UniqueClaimSweeper(
                    pool, UniqueSweepConfig(interval_s=1, max_per_pass=1000)
                ).run_once()
            ).deleted
        finally:
            await pool.close()

    return asyncio.run(main())


def claimed_job_ids() -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT job_id FROM awa.unique_claims ORDER BY job_id")
        return [row[0] for row in cursor.fetchall()]


def test_sweeper_drops_only_claims_that_can_no_longer_conflict():
    live = awa.enqueue(record, args={"n": 1}, unique=awa.Unique())
    finished = awa.enqueue(record, args={"n": 2}, unique=ACTIVE)
    pruned = awa.enqueue(record, args={"n": 3}, unique=awa.Unique())
    ended = awa.enqueue(record, args={"n": 4}, unique=awa.Unique(period=timedelta(hours=1)))
    (running,) = [job for job in claim() if job.job_id == finished]
    complete(running)  # finished: ACTIVE states do not cover completed
    with connection.cursor() as cursor:
        # A holder whose history was pruned, and a period that ended a while ago.
        cursor.execute("UPDATE awa.unique_claims SET job_id = -job_id WHERE job_id = %s", [pruned])
        cursor.execute(
            "UPDATE awa.unique_claims SET expires_at = now() - interval '2 minutes' "
            "WHERE job_id = %s",
            [ended],
        )
    assert sweep() == 3
    assert claimed_job_ids() == [live]
    assert sweep() == 0


def test_sweeper_resumes_across_passes_on_a_large_table():
    awa.enqueue_many(record, [{"n": n} for n in range(450)], unique=awa.Unique())
    with connection.cursor() as cursor:
        cursor.execute("UPDATE awa.unique_claims SET job_id = -job_id")  # every holder gone

    async def passes() -> list[int]:
        pool = await open_pool("default", max_size=2)
        try:
            sweeper = UniqueClaimSweeper(pool, UniqueSweepConfig(interval_s=1, max_per_pass=200))
            return [(await sweeper.run_once()).deleted for _ in range(4)]
        finally:
            await pool.close()

    assert asyncio.run(passes()) == [200, 200, 50, 0]
    assert claimed_job_ids() == []


def test_running_and_completing_a_unique_job_never_touches_its_claim():
    job_id = awa.enqueue(record, args={"n": 1}, unique=ACTIVE)

    def claim_version():
        with connection.cursor() as cursor:
            cursor.execute("SELECT xmin::text, job_id FROM awa.unique_claims")
            return cursor.fetchall()

    before = claim_version()
    run_burst()
    assert awa.get_job(job_id).state == "completed"
    assert claim_version() == before  # released lazily, by the next enqueue of the key
