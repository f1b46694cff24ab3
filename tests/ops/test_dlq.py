"""Dead-letter queue: routing of terminal failures on DLQ queues, retry, purge, bulk filters,
moving failed history in, and retention, against real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

import awa_django as awa
from awa_django.exceptions import ConfirmationRequired, InvalidJob
from awa_django.maintenance.retention import RetentionCleaner, RetentionConfig
from awa_django.storage.connections import open_pool
from tests.conftest import run_burst, wait_until
from tests.jobs import always_fails, fails_through_lease, noop, terminal

pytestmark = pytest.mark.usefixtures("awa_db")

QUEUES = {"default": {"dlq": True}, "email": {}, "other": {"dlq": True}}


@pytest.fixture(autouse=True)
def dlq_queues():
    with override_settings(AWA={"QUEUES": QUEUES, "RETRY_BACKOFF_BASE_S": 0.01}):
        yield


def runs(job_id: int) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT note FROM tests_job_runs WHERE job_id = %s ORDER BY id", [job_id])
        return [row[0] for row in cursor.fetchall()]


def count(sql: str, *params: object) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.fetchone()[0])


def test_exhausted_attempts_on_a_dlq_queue_land_in_the_dlq_with_errors_and_lease():
    job_id = awa.enqueue(always_fails, args={"message": "nope"})
    run_burst(burst_wait_s=1.0)

    entry = awa.dlq.get(job_id)
    assert entry is not None
    assert entry.dlq_reason == "attempts_exhausted"
    assert entry.attempt == 3 and entry.original_run_lease == 3
    assert [e["attempt"] for e in entry.errors] == [1, 2, 3]
    assert entry.errors[-1]["message"] == "nope on attempt 3"
    assert "RuntimeError" in entry.errors[-1]["traceback"]
    assert awa.get_job(job_id).state == "dlq"
    assert awa.dlq.depth() == 1 and awa.dlq.depth("default") == 1 and awa.dlq.depth("email") == 0


def test_a_terminal_error_routes_at_once_with_its_reason():
    job_id = awa.enqueue(terminal)
    run_burst()
    entry = awa.dlq.get(job_id)
    assert entry is not None and entry.dlq_reason == "terminal_error" and entry.attempt == 1
    assert entry.errors[0]["type"] == "tests.jobs.PaymentDeclined"


def test_queues_without_dlq_keep_failing_into_history():
    job_id = awa.enqueue(terminal, queue="email")
    run_burst()
    assert awa.get_job(job_id).state == "failed"
    assert awa.dlq.get(job_id) is None and awa.dlq.depth() == 0


def test_retry_runs_again_as_a_fresh_attempt_with_a_larger_lease_then_purge():
    job_id = fails_through_lease.enqueue(last_failing_lease=1)
    run_burst()
    entry = awa.dlq.get(job_id)
    assert entry is not None and entry.original_run_lease == 1

    assert awa.dlq.retry(job_id) is True
    assert awa.dlq.get(job_id) is None
    record = awa.get_job(job_id)
    assert (record.state, record.attempt, record.run_lease) == ("available", 0, 2)
    assert len(record.errors) == 1  # the history comes along
    run_burst()
    done = awa.get_job(job_id)
    assert (done.state, done.attempt, done.run_lease) == ("completed", 1, 3)
    assert runs(job_id) == ["lease=1 attempt=1", "lease=3 attempt=1"]
    assert awa.dlq.retry(job_id) is False  # no longer in the DLQ

    gone = fails_through_lease.enqueue(last_failing_lease=5)
    run_burst()
    assert awa.dlq.purge(gone) is True
    assert awa.dlq.get(gone) is None and awa.dlq.purge(gone) is False


def test_retry_with_run_at_defers_and_can_move_queue_and_priority():
    job_id = awa.enqueue(terminal)
    run_burst()
    assert awa.dlq.retry(job_id, run_at=timedelta(hours=1), queue="email", priority=4)
    record = awa.get_job(job_id)
    assert (record.state, record.queue, record.priority, record.attempt) == (
        "scheduled",
        "email",
        4,
        0,
    )
    with pytest.raises(InvalidJob, match="queue"):
        awa.dlq.retry(job_id, queue="nope")
    with pytest.raises(InvalidJob, match="priority"):
        awa.dlq.retry(job_id, priority=9)


def test_bulk_actions_need_a_filter_or_all_and_respect_filters():
    on_default = [awa.enqueue(terminal) for _ in range(3)]
    on_other = [awa.enqueue(terminal, queue="other") for _ in range(2)]
    kind_other = awa.enqueue(always_fails, args={}, max_attempts=1)
    run_burst()
    assert awa.dlq.depths() == {"default": 4, "other": 2}

    with pytest.raises(ConfirmationRequired, match="all=True"):
        awa.dlq.retry_bulk()
    with pytest.raises(ConfirmationRequired):
        awa.dlq.purge_bulk()
    assert awa.dlq.depth() == 6  # nothing changed

    assert awa.dlq.purge_bulk(queue="other") == 2
    assert {e.job_id for e in awa.dlq.list()} == {*on_default, kind_other}
    assert awa.dlq.purge_bulk(kind="tests.always_fails") == 1
    assert awa.dlq.purge_bulk(older_than=timedelta(hours=1)) == 0
    assert awa.dlq.retry_bulk(queue="default", to_queue="email") == 3
    assert {awa.get_job(j).queue for j in on_default} == {"email"}
    assert all(awa.get_job(j).state == "available" for j in on_default)
    assert awa.dlq.depth() == 0
    with pytest.raises(InvalidJob, match="older_than"):
        awa.dlq.list(older_than=-1)
    assert on_other  # (purged above)


def test_list_pages_newest_first_and_filters_by_reason():
    ids = [awa.enqueue(terminal) for _ in range(5)]
    exhausted = awa.enqueue(always_fails, args={}, max_attempts=1)
    run_burst()
    first = awa.dlq.list(limit=4)
    rest = awa.dlq.list(limit=4, before=(first[-1].dlq_at, first[-1].job_id))
    assert len(first) == 4 and len(rest) == 2
    assert {e.job_id for e in first + rest} == {*ids, exhausted}
    assert [e.job_id for e in awa.dlq.list(reason="attempts_exhausted")] == [exhausted]


def test_move_failed_brings_failed_history_into_the_dlq():
    in_ring = awa.enqueue(terminal, queue="email")
    pruned = awa.enqueue(always_fails, queue="email", args={}, max_attempts=1)
    completed = awa.enqueue(noop, queue="email")
    run_burst()
    # Simulate a pruned slot: the failed job's history lives in terminal_history only.
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.terminal_history SELECT job_id, run_lease, state, kind, queue, "
            "priority, args, attempt, max_attempts, run_at, created_at, metadata, tags, errors, "
            "NULL, NULL, finalized_at FROM awa.jobs WHERE job_id = %s",
            [pruned],
        )
    with pytest.raises(ConfirmationRequired):
        awa.dlq.move_failed()
    assert awa.dlq.move_failed(queue="email", kind="tests.terminal") == 1
    assert awa.dlq.move_failed(all=True) == 1
    assert awa.dlq.move_failed(all=True) == 0
    assert {e.job_id: e.dlq_reason for e in awa.dlq.list()} == {
        in_ring: "moved_from_failed",
        pruned: "moved_from_failed",
    }
    assert count("SELECT count(*) FROM awa.terminal_history") == 0
    assert awa.get_job(completed).state == "completed"
    assert awa.dlq.move_failed(job_ids=[completed]) == 0


def test_the_leader_deletes_entries_past_dlq_retention():
    old, recent = awa.enqueue(terminal), awa.enqueue(terminal)
    run_burst()
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE awa.dlq_entries SET dlq_at = now() - interval '31 days' WHERE job_id = %s",
            [old],
        )

    async def cleanup() -> int:
        pool = await open_pool("default", max_size=1)
        try:
            cleaner = RetentionCleaner(
                pool,
                RetentionConfig(
                    interval_s=60,
                    dlq_retention_s=30 * 86400,
                    failed_retention_s=3 * 86400,
                    batch_size=10,
                ),
            )
            return (await cleaner.run_once()).dlq_deleted
        finally:
            await pool.close()

    assert asyncio.run(cleanup()) == 1
    assert awa.dlq.get(old) is None and awa.dlq.get(recent) is not None


def test_round_trip_with_a_real_worker_process(worker_process):
    """Exhaust attempts on a DLQ queue with a real worker -> DLQ -> retry -> completed; the
    run_lease of every run only grows."""
    env = {"AWA_OVERRIDES": json.dumps({"QUEUES": QUEUES, "POLL_INTERVAL_S": 0.1})}
    worker = worker_process("--queue", "default", env=env).wait_ready()
    job_id = fails_through_lease.enqueue(last_failing_lease=1)
    wait_until(lambda: awa.dlq.get(job_id) is not None)
    failed_lease = awa.dlq.get(job_id).original_run_lease

    assert awa.dlq.retry(job_id)
    wait_until(lambda: awa.get_job(job_id).state == "completed")
    record = awa.get_job(job_id)
    assert record.run_lease > failed_lease
    leases = [int(note.split()[0].split("=")[1]) for note in runs(job_id)]
    assert leases == sorted(leases) and len(set(leases)) == len(leases) == 2

    purged = fails_through_lease.enqueue(last_failing_lease=9)
    wait_until(lambda: awa.dlq.get(purged) is not None)
    assert awa.dlq.purge(purged) and awa.dlq.get(purged) is None
    worker.proc.terminate()
    assert worker.wait() == 0


def test_attempts_the_rescuer_closes_on_their_last_attempt_route_too(caplog):
    from awa_django.conf import get_settings
    from awa_django.core.claimed_job import claimed_job_rows
    from awa_django.core.retry import RetryPolicy
    from awa_django.maintenance.rescuer import RescueConfig, Rescuer
    from awa_django.storage.queue import ClaimRequest, claim_ready
    from awa_django.storage.statement import run_async

    job_id = awa.enqueue(noop, max_attempts=1)
    run_burst(queues={"email": 1})  # publishes the DLQ policies, runs nothing of default

    async def claim_then_rescue() -> int:
        pool = await open_pool("default", max_size=2)
        try:
            async with pool.connection() as conn:
                claimed = await run_async(
                    conn,
                    claim_ready(
                        ClaimRequest(queue="default", claimed_by="gone", deadline_s=0, aging_s=0),
                        rows=claimed_job_rows,
                        limit=1,
                    ),
                )
                assert [c.job_id for c in claimed] == [job_id]
            rescuer = Rescuer(
                pool,
                replace(RescueConfig.from_settings(get_settings()), staleness_s=0),
                policy=RetryPolicy(base_s=1, max_s=1, jitter=0, unknown_kind_timeout_s=3600),
                now=timezone.now,
            )
            return (await rescuer.run_once()).rescued
        finally:
            await pool.close()

    assert asyncio.run(claim_then_rescue()) == 1
    entry = awa.dlq.get(job_id)
    assert entry is not None and entry.dlq_reason == "attempts_exhausted"
    assert entry.errors[-1]["type"] == "awa_django.exceptions.AttemptRescued"
    # Its log line says where it went: the dead-letter queue, not failed history.
    (rescued,) = [r for r in caplog.records if r.getMessage().startswith("attempt rescued")]
    assert (rescued.job_id, rescued.outcome) == (job_id, "dlq")
    assert "reason=heartbeat outcome=dlq" in rescued.getMessage()


def test_awa_retry_runs_a_cancelled_or_failed_job_again():
    queued = noop.enqueue()
    awa.cancel(queued)  # tombstoned before it ever ran
    failed = awa.enqueue(terminal, queue="email")
    run_burst()
    assert awa.get_job(failed).state == "failed"

    assert awa.retry(queued) and awa.retry(failed, queue="other")
    assert {j.job_id: j.state for j in awa.get_jobs([queued, failed])} == {
        queued: "available",
        failed: "available",
    }
    run_burst()
    assert awa.get_job(queued).state == "completed"
    # The retried terminal job fails again, now on a DLQ queue: it is held there.
    assert awa.get_job(failed).state == "dlq" and awa.dlq.get(failed).queue == "other"
    assert awa.retry(queued) is False  # completed: nothing to retry


def test_the_admin_filter_and_the_keywords_say_the_same():
    # The admin's form builds a DlqFilter; the operator API takes its keywords (dlq.Match).
    from awa_django.storage.dlq import DlqFilter

    where = DlqFilter(
        queue="default",
        kind="tests.noop",
        reason="terminal_error",
        older_than_s=60.0,
        error_type="builtins.LookupError",
        fingerprint="order <n> not found",
        kind_prefix="noop",
        error_type_prefix="lookup",
    )
    keywords = awa.dlq.match(where)
    assert keywords["older_than"] == 60.0
    assert awa.dlq.list(**keywords) == []
    assert awa.dlq._filter(keywords, all=False) == where
