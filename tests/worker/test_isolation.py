"""A completion or heartbeat the database refuses ends its own job, with the reason, and every
other job of the batch is written: a real in-process worker against real PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test import override_settings

import awa_django as awa
from awa_django.core.completion import Completion
from awa_django.core.outcome import Outcome
from awa_django.core.retry import RetryPolicy
from awa_django.storage.browse import job_progress
from awa_django.storage.connections import open_pool
from awa_django.storage.statement import run
from awa_django.worker.completer import Completer
from tests.conftest import BackgroundWorker, wait_until
from tests.jobs import noop, slow_first
from tests.maintenance.test_rescue_rings_cancel import claim
from tests.misbehaving import (
    retry_in_forever,
    unstorable_checkpoint,
    unstorable_result,
    unstorable_task,
)

pytestmark = pytest.mark.usefixtures("awa_db", "storage_kinds")

FAST = {
    "QUEUES": {"default": {"concurrency": 8}},
    "RETRY_BACKOFF_BASE_S": 0.05,
    "RETRY_JITTER": 0,
    "POLL_INTERVAL_S": 0.1,
    "PROMOTE_INTERVAL_S": 0.05,
    "HEARTBEAT_INTERVAL_S": 0.1,
    "HEARTBEAT_STALENESS_S": 30,
}
UNSTORABLE = "awa_django.exceptions.UnstorableAttempt"


def runs(job_id: int) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT note FROM tests_job_runs WHERE job_id = %s ORDER BY id", [job_id])
        return [note for (note,) in cursor.fetchall()]


def run_counts() -> dict[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT job_id, count(*) FROM tests_job_runs WHERE job_id IS NOT NULL GROUP BY 1"
        )
        return dict(cursor.fetchall())


@override_settings(AWA=FAST)
def test_completions_the_database_refuses_end_their_own_jobs_and_the_batch_lands():
    poisoned = [unstorable_result.enqueue(), retry_in_forever.enqueue()]
    task = unstorable_task.enqueue()
    fine = noop.enqueue_many([{"n": n} for n in range(20)])
    worker = BackgroundWorker().start()
    try:
        wait_until(lambda: {j.state for j in awa.get_jobs(fine)} == {"completed"}, timeout=10)
        ended = [*poisoned, int(task.id)]
        wait_until(lambda: {j.state for j in awa.get_jobs(ended)} == {"failed"}, timeout=10)
    finally:
        summary = worker.stop(timeout=10)
    assert summary.stale == 0
    result, retried = awa.get_jobs(poisoned)
    # Each refused attempt was recorded, and the job retried by its policy (2 attempts).
    assert result.attempt == 2 and runs(result.job_id) == ["unstorable_result"] * 2
    assert [e["type"] for e in result.errors] == [UNSTORABLE, UNSTORABLE]
    message = result.errors[0]["message"]
    assert message.startswith("the database refused to store how this attempt ended (completed)")
    assert "SQLSTATE 22P02" in message  # invalid input syntax for type json
    assert result.result is None
    # RetryAfter(1e300) ends in no timestamp: that attempt is retried with the usual backoff,
    # and the last one fails as RetryAfter does when no attempt is left.
    assert retried.attempt == 2 and len(runs(retried.job_id)) == 2
    assert [e["type"] for e in retried.errors] == [UNSTORABLE, "awa_django.exceptions.RetryAfter"]
    assert "(retryable)" in retried.errors[0]["message"]
    assert "SQLSTATE 22008" in retried.errors[0]["message"]  # timestamp out of range
    # The task's return value is refused before the write (exact_json), as an error retrying
    # cannot cure: one attempt, failed with the reason.
    task.refresh()
    assert task.status.name == "FAILED" and len(task.errors) == 1
    assert task.errors[0].exception_class_path == "awa_django.exceptions.InvalidReturnValue"
    assert "lone surrogate" in task.errors[0].traceback
    # None of the other jobs of those batches was held back or run again.
    assert all(run_counts().get(job_id, 0) == 0 for job_id in fine)
    assert all(awa.get_job(job_id).attempt == 1 for job_id in fine)


@override_settings(AWA=FAST)
def test_a_checkpoint_the_database_refuses_ends_its_attempt_and_heartbeats_go_on():
    refused = unstorable_checkpoint.enqueue()
    healthy = slow_first.enqueue(seconds=1.0)  # saves a checkpoint, runs past a few heartbeats
    worker = BackgroundWorker().start()
    try:
        wait_until(lambda: awa.get_job(refused).state == "failed", timeout=10)
        wait_until(lambda: awa.get_job(healthy).state == "completed", timeout=10)
    finally:
        summary = worker.stop(timeout=10)
    job = awa.get_job(refused)
    # Both attempts (max_attempts=2) saved a checkpoint the database refused: each was closed,
    # as failed with the reason, and its handler told to stop, which it did.
    assert job.attempt == 2
    assert [e["type"] for e in job.errors] == [UNSTORABLE, UNSTORABLE]
    assert "this attempt's progress or checkpoint" in job.errors[0]["message"]
    assert runs(refused) == ["checkpointed", "saw cancel"] * 2
    with connection.cursor() as cursor:
        # Nothing of what was refused was kept for the next attempt.
        assert run(cursor, job_progress(refused)) is None
    # The healthy job's checkpoint went out with the same heartbeats; it was never cancelled.
    assert runs(healthy) == ["slow-start", "slow-end"]
    # Each ended attempt's handler returned afterwards: those completions are stale.
    assert summary.stale == 2


def test_an_attempt_closed_under_its_handler_is_never_sent_twice_in_one_batch():
    job_id = awa.enqueue("k.superseded", args={}, max_attempts=1)
    (job,) = claim()
    ended = Completion.of(job, Outcome.FAILED, error={"attempt": 1, "message": "refused"})
    late = Completion.of(job, Outcome.COMPLETED)

    async def main() -> Completer:
        pool = await open_pool("default", max_size=2)
        completer = Completer(
            pool,
            batch_size=10,
            flush_s=0.05,  # both arrive within one flush
            policy=RetryPolicy(base_s=1, max_s=1, jitter=0, unknown_kind_timeout_s=3600),
            now=lambda: datetime.now(UTC),
        )
        await completer.start()
        try:
            completer.supersede(ended)
            completer.submit(late)
            await completer.drain()
        finally:
            await completer.stop()
            await pool.close()
        return completer

    completer = asyncio.run(main())
    assert (completer.written_count, completer.stale_count) == (1, 1)
    assert awa.get_job(job_id).state == "failed"
