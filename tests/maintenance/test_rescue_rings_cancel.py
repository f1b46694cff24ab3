"""Rescue, ring rotation and prune, progress/checkpoint and cancel, against real PostgreSQL.

Maintenance passes are driven directly with ``run_once``; workers run in-process."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.test import override_settings

import awa_django as awa
from awa_django.core.claimed_job import claimed_job_rows
from awa_django.core.completion import Completion
from awa_django.core.outcome import Outcome
from awa_django.core.retry import RetryPolicy
from awa_django.maintenance.rescuer import RescueConfig, Rescuer
from awa_django.maintenance.rings import RingConfig, RingMaintainer
from awa_django.storage.connections import connect, open_pool
from awa_django.storage.execution import LiveAttempt, close_attempts, heartbeat_attempts
from awa_django.storage.queue import ClaimRequest, claim_ready
from awa_django.storage.statement import run_async
from tests.conftest import BackgroundWorker, run_burst, wait_until
from tests.jobs import checkpointed_retry, cooperative, noop, record

pytestmark = pytest.mark.usefixtures("awa_db", "storage_kinds")

POLICY = RetryPolicy(base_s=0.01, max_s=1, jitter=0, unknown_kind_timeout_s=3600)
FAST = {
    "QUEUES": {"default": {"concurrency": 4}, "email": {"concurrency": 2}},
    "RETRY_BACKOFF_BASE_S": 0.02,
    "RETRY_JITTER": 0,
    "POLL_INTERVAL_S": 0.1,
    "PROMOTE_INTERVAL_S": 0.05,
    "LEADER_ELECTION_INTERVAL_S": 0.1,
}


def run(fn, *args: Any, **kwargs: Any):
    async def main():
        async with await connect("default") as conn:
            return await fn(conn, *args, **kwargs)

    return asyncio.run(main())


def with_pool(make_task, **kwargs: Any):
    async def main():
        pool = await open_pool("default", max_size=2)
        try:
            return await make_task(pool, **kwargs).run_once()
        finally:
            await pool.close()

    return asyncio.run(main())


def rescue(staleness_s: float = 60.0):
    return with_pool(
        lambda pool: Rescuer(
            pool,
            RescueConfig(interval_s=1, staleness_s=staleness_s, batch_size=100),
            policy=POLICY,
            now=lambda: datetime.now(UTC),
        )
    )


def rings(completed_retention_s: float = 0.0, failed_retention_s: float = 3600.0):
    return with_pool(
        lambda pool: RingMaintainer(
            pool,
            RingConfig(
                interval_s=1,
                completed_retention_s=completed_retention_s,
                failed_retention_s=failed_retention_s,
                lock_timeout_ms=200,
            ),
        )
    )


def claim(deadline_s: float = 0.0):
    request = ClaimRequest(queue="default", claimed_by="dead", deadline_s=deadline_s)
    return run(run_async, claim_ready(request, rows=claimed_job_rows, limit=100))


def complete(job, outcome=Outcome.COMPLETED, **extra):
    return set(run(run_async, close_attempts([Completion.of(job, outcome, **extra)])))


def scalar(sql: str, params: list[Any] | None = None) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])
        return cursor.fetchone()[0]


def pause(seconds: float) -> None:
    scalar("SELECT pg_sleep(%s)", [seconds])


# -- rescue ------------------------------------------------------------------------------------


def age_claims(seconds: float = 3600) -> None:
    """Move every claim back in time, as if its worker had gone silent that long ago."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE awa.claim_receipts SET claimed_at = claimed_at - make_interval(secs => %s)",
            [seconds],
        )


def test_silent_attempt_is_rescued_and_its_late_completion_is_stale():
    job_id = awa.enqueue("k.x", args={}, max_attempts=3)
    (job,) = claim()
    assert rescue(staleness_s=60).rescued == 0  # still fresh
    age_claims()
    result = rescue(staleness_s=60)
    assert (result.found, result.rescued) == (1, 1)
    record_ = awa.get_job(job_id)
    assert record_.state == "retryable"
    assert record_.errors[-1]["type"] == "awa_django.exceptions.AttemptRescued"
    assert "heartbeat stale" in record_.errors[-1]["message"]
    assert complete(job) == set()  # the rescued attempt's worker reports too late


def test_exhausted_job_is_failed_by_rescue():
    job_id = awa.enqueue("k.x", args={}, max_attempts=1)
    claim()
    age_claims()
    rescue(staleness_s=60)
    assert awa.get_job(job_id).state == "failed"


def test_heartbeats_keep_a_long_attempt_alive_whatever_its_deadline():
    overdue_id = awa.enqueue("k.deadline", args={})
    (overdue,) = claim(deadline_s=0.01)
    alive_id = awa.enqueue("k.alive", args={})
    (alive,) = claim()
    pause(0.05)  # the overdue attempt's deadline is now in the past
    beats = [LiveAttempt.of(overdue), LiveAttempt.of(alive, checkpoint={"at": 1})]
    assert run(run_async, heartbeat_attempts(beats, claimed_by="w")) == {
        (overdue_id, 1),
        (alive_id, 1),
    }
    age_claims()  # both claims look an hour old
    assert scalar("SELECT count(*) FROM awa.leases WHERE job_id = %s", [alive_id]) == 1
    # Both heartbeats are fresh although the claims are old, and one is past its deadline: its
    # worker stops it there, so the leader leaves both alone.
    assert rescue(staleness_s=60).found == 0
    assert {awa.get_job(overdue_id).state, awa.get_job(alive_id).state} == {"running"}
    # Once its heartbeats stop, the overdue attempt is rescued as silent, like any other.
    backdate(overdue_id, receipt=False, lease=True)
    assert rescue(staleness_s=60).rescued == 1
    assert "heartbeat stale" in awa.get_job(overdue_id).errors[-1]["message"]
    assert awa.get_job(alive_id).state == "running"
    # A heartbeat for an attempt closed elsewhere comes back as no longer open.
    assert run(run_async, heartbeat_attempts([LiveAttempt.of(overdue)], claimed_by="w")) == set()
    # Closing the attempt deletes its lease.
    complete(alive)
    assert scalar("SELECT count(*) FROM awa.leases WHERE job_id = %s", [alive_id]) == 0


def test_a_0_1_0_leader_finds_the_same_attempts_through_the_four_argument_form():
    # During a rolling deploy an 0.1.0 leader passes a deadline bound too; it no longer makes
    # an attempt rescuable.
    overdue_id = awa.enqueue("k.deadline", args={})
    claim(deadline_s=0.01)
    pause(0.05)
    four = "SELECT count(*) FROM awa.find_rescuable(60, 100, NULL, NULL)"
    assert scalar(four) == 0
    backdate(overdue_id)
    assert scalar(four) == 1


class LeaderRescuer:
    """One Rescuer kept across passes, as the leader keeps it (each pass on a fresh pool)."""

    def __init__(self, *, staleness_s: float, batch_size: int = 100) -> None:
        self.rescuer = Rescuer(
            None,  # type: ignore[arg-type]  # set per pass
            RescueConfig(interval_s=1, staleness_s=staleness_s, batch_size=batch_size),
            policy=POLICY,
            now=lambda: datetime.now(UTC),
        )

    def run_once(self):
        async def main():
            pool = await open_pool("default", max_size=2)
            self.rescuer._pool = pool
            try:
                return await self.rescuer.run_once()
            finally:
                await pool.close()

        return asyncio.run(main())


def backdate(job_id: int, *, receipt: bool = True, lease: bool = False) -> None:
    """Move one attempt's claim (and its lease's heartbeat) an hour back."""
    with connection.cursor() as cursor:
        if receipt:
            cursor.execute(
                "UPDATE awa.claim_receipts SET claimed_at = claimed_at - interval '1 hour'"
                " WHERE job_id = %s",
                [job_id],
            )
        if lease:
            cursor.execute(
                "UPDATE awa.leases SET heartbeat_at = heartbeat_at - interval '1 hour'"
                " WHERE job_id = %s",
                [job_id],
            )


def test_after_a_complete_pass_rescue_looks_only_at_receipts_due_since():
    staleness_s = 0.5
    leader = LeaderRescuer(staleness_s=staleness_s)
    silent_id = awa.enqueue("k.silent", args={})
    claim()
    assert leader.run_once().found == 0  # fresh: the pass completes and sets the cursor
    # A receipt claimed before the cursor cannot become due later (a claim does not last the
    # staleness window), so this one, moved back, is out of every later pass's window...
    hidden_id = awa.enqueue("k.hidden", args={})
    claim()
    backdate(hidden_id)
    pause(staleness_s + 0.1)
    # ...while the one that went silent since the last pass is found.
    assert leader.run_once().rescued == 1
    assert awa.get_job(silent_id).state == "retryable"
    assert awa.get_job(hidden_id).state == "running"
    # A new leader starts without a cursor and looks at every retained receipt once.
    assert rescue(staleness_s=staleness_s).rescued == 1
    assert awa.get_job(hidden_id).state == "retryable"


def test_a_windowed_pass_still_finds_leased_attempts():
    leader = LeaderRescuer(staleness_s=60)
    leased_id = awa.enqueue("k.leased", args={})
    (leased,) = claim()
    assert run(run_async, heartbeat_attempts([LiveAttempt.of(leased)], claimed_by="w")) == {
        (leased_id, 1)
    }
    assert leader.run_once().found == 0
    # The leased attempt was claimed long before the cursor and its heartbeats stopped: only
    # its lease says it is due.
    backdate(leased_id, lease=True)
    # Claimed after the cursor and past its deadline by the next pass, but not silent: its
    # worker's to stop.
    overdue_id = awa.enqueue("k.overdue", args={})
    claim(deadline_s=0.2)
    pause(0.3)
    assert leader.run_once().rescued == 1
    assert "heartbeat stale" in awa.get_job(leased_id).errors[-1]["message"]
    assert awa.get_job(overdue_id).state == "running"


def test_a_pass_that_fills_its_batch_leaves_the_cursor_for_the_rest():
    leader = LeaderRescuer(staleness_s=60, batch_size=1)
    ids = [awa.enqueue("k.silent", args={}) for _ in range(2)]
    claim()
    age_claims()
    assert leader.run_once().rescued == 1
    # Both claims are older than the first pass's cutoff; the second is found all the same.
    assert leader.run_once().rescued == 1
    assert {awa.get_job(job_id).state for job_id in ids} == {"retryable"}


def test_a_complete_pass_records_its_cursor_for_the_readers_of_open_attempts():
    def mark() -> datetime | None:
        return scalar("SELECT max(claimed_before) FROM awa.rescue_marks")

    leader = LeaderRescuer(staleness_s=60, batch_size=1)
    for _ in range(2):
        awa.enqueue("k.silent", args={})
    claim()
    age_claims()
    # A full batch may have left silent attempts unseen: nothing is recorded.
    assert leader.run_once().rescued == 1
    assert leader.run_once().rescued == 1
    assert mark() is None
    assert leader.run_once().found == 0
    recorded = mark()
    assert recorded is not None
    assert recorded <= scalar("SELECT now() - interval '60 seconds'")
    # A new leader's first pass (a wider staleness, so an older cutoff) leaves it where it is.
    assert LeaderRescuer(staleness_s=3600).run_once().found == 0
    assert mark() == recorded


# -- rings -------------------------------------------------------------------------------------


def slot_of(job_id: int) -> int:
    return scalar("SELECT max(ready_slot) FROM awa.ready_entries WHERE job_id = %s", [job_id])


def test_rotation_seals_a_slot_and_an_idle_ring_stops_rotating():
    assert rings().queue_rotation == "skipped_idle"
    first = awa.enqueue("k.r", args={})
    assert rings().queue_rotation == "rotated"
    second = awa.enqueue("k.r", args={})
    assert (slot_of(first), slot_of(second)) == (0, 1)
    generation = scalar("SELECT max(generation) FROM awa.queue_ring_rotations")
    rings()  # slot 1 now holds a row: rotates again; then idle
    assert rings().queue_rotation == "skipped_idle"
    assert scalar("SELECT max(generation) FROM awa.queue_ring_rotations") == generation + 1


def test_rotation_ledgers_keep_only_their_newest_generations():
    def generations(ring: str) -> list[int]:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT generation FROM awa.{ring}_ring_rotations ORDER BY 1")
            return [row[0] for row in cursor.fetchall()]

    for _ in range(3):
        awa.enqueue("k.r", args={})  # the current queue slot holds a row
        assert scalar("SELECT awa.rotate_queue_ring(2)") == "rotated"
    assert generations("queue") == [2, 3]
    with connection.cursor() as cursor:
        for _ in range(3):
            # A lease in the current lease slot, so the ring may rotate away from it.
            cursor.execute(
                "INSERT INTO awa.leases (job_id, run_lease, lease_slot, ready_slot, queue,"
                " priority, shard, lane_seq, claimed_by)"
                " SELECT nextval('awa.job_id_seq'), 1, r.slot, 0, 'default', 2, 0, 0, 'w'"
                "   FROM awa.lease_ring_rotations r ORDER BY r.generation DESC LIMIT 1"
            )
            assert scalar("SELECT awa.rotate_lease_ring(1)") == "rotated"
    assert generations("lease") == [3]


def test_prune_waits_for_claims_closures_and_retention_then_truncates():
    job_id = awa.enqueue("k.p", args={})
    rings()  # seal slot 0
    assert rings().queue_prune == "pending_ready"
    (job,) = claim()
    assert rings().queue_prune == "open_attempt"
    complete(job)
    assert rings(completed_retention_s=3600).queue_prune == "retention"
    assert rings(completed_retention_s=0).queue_prune == "pruned"
    assert awa.get_job(job_id) is None  # history reclaimed with the slot
    assert scalar("SELECT count(*) FROM awa.ready_entries_0") == 0


def test_prune_carries_failed_history_within_retention_and_never_loses_a_live_job():
    failed_id = awa.enqueue("k.f", args={}, max_attempts=1)
    (failed,) = claim()
    complete(failed, Outcome.FAILED, error={"message": "boom"})
    waiting_id = awa.enqueue("k.w", args={})  # same slot, never claimed
    rings()  # seal slot 0
    assert rings().queue_prune == "pending_ready"
    (waiting,) = claim()
    complete(waiting)
    assert rings().queue_prune == "pruned"
    job = awa.get_job(failed_id)
    assert (job.state, job.errors[-1]["message"]) == ("failed", "boom")
    assert slot_of(failed_id) is None  # out of the ring, into terminal_history
    assert scalar("SELECT count(*) FROM awa.terminal_history WHERE job_id = %s", [failed_id]) == 1
    assert awa.get_job(waiting_id) is None
    assert claim() == []
    # Retained history does not keep the ring busy: with no traffic it goes idle.
    assert rings().queue_rotation == "skipped_idle"


def test_failed_history_past_retention_is_deleted():
    from awa_django.maintenance.retention import RetentionCleaner, RetentionConfig

    failed_id = awa.enqueue("k.f", args={}, max_attempts=1)
    (failed,) = claim()
    complete(failed, Outcome.FAILED, error={"message": "boom"})
    rings()
    rings()  # seal slot 0, then prune it into terminal_history
    assert awa.get_job(failed_id).state == "failed"
    result = with_pool(
        lambda pool: RetentionCleaner(
            pool,
            RetentionConfig(
                interval_s=1, dlq_retention_s=3600, failed_retention_s=0, batch_size=10
            ),
        )
    )
    assert result.history_deleted == 1
    assert awa.get_job(failed_id) is None


def fail_into_dlq(job_id: int) -> None:
    (failed,) = claim()
    complete(failed, Outcome.FAILED, error={"message": "secret error"})
    assert awa.dlq.move_failed(job_ids=[job_id]) == 1


def test_prune_carries_nothing_of_a_purged_job_and_drops_its_marker_with_its_last_slot():
    job_id = awa.enqueue("k.f", args={"secret": 1}, max_attempts=1)
    fail_into_dlq(job_id)
    assert scalar("SELECT awa.rotate_queue_ring(1000)") == "rotated"
    assert awa.dlq.retry(job_id)  # its next attempt's rows are in slot 1
    fail_into_dlq(job_id)
    assert awa.dlq.purge(job_id)
    markers = "SELECT count(*) FROM awa.purged_jobs WHERE job_id = %s"
    assert scalar(markers, [job_id]) == 1

    assert scalar("SELECT awa.prune_queue_ring(0, 3600, 200)") == "pruned"  # slot 0
    # Slot 1 still holds the failed attempt: the marker stays, and the failure was not carried
    # into terminal_history.
    assert scalar(markers, [job_id]) == 1
    assert scalar("SELECT count(*) FROM awa.terminal_history WHERE job_id = %s", [job_id]) == 0
    assert awa.get_job(job_id) is None

    assert scalar("SELECT awa.rotate_queue_ring(1000)") == "rotated"
    assert scalar("SELECT awa.prune_queue_ring(0, 3600, 200)") == "pruned"  # slot 1
    assert scalar(markers, [job_id]) == 0
    assert slot_of(job_id) is None
    assert scalar("SELECT count(*) FROM awa.terminal_history WHERE job_id = %s", [job_id]) == 0
    assert awa.get_job(job_id) is None


def test_orphan_lease_from_a_late_heartbeat_is_removed_by_lease_prune():
    job_id = awa.enqueue("k.o", args={})
    (job,) = claim()
    complete(job)
    # A heartbeat that raced the closure would have re-created the lease; simulate its insert.
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.leases (job_id, run_lease, lease_slot, ready_slot, queue, priority, "
            "shard, lane_seq, claimed_by) VALUES (%s, %s, 0, %s, %s, %s, %s, %s, 'w')",
            [
                job_id,
                job.run_lease,
                job.ready_slot,
                job.queue,
                job.priority,
                job.shard,
                job.lane_seq,
            ],
        )
    rings()
    assert scalar("SELECT count(*) FROM awa.leases") == 0


def test_rotation_and_prune_under_load_account_for_every_job_once(worker_process):
    committed: list[int] = []
    stop = threading.Event()

    def producer(seed: int) -> None:
        rng = random.Random(seed)
        try:
            while not stop.is_set():
                try:
                    with transaction.atomic():
                        ids = [
                            record.enqueue(n=rng.randint(0, 9)) for _ in range(rng.randint(1, 3))
                        ]
                        if rng.random() < 0.2:
                            raise RuntimeError("rollback")
                    committed.extend(ids)
                except RuntimeError:
                    pass
        finally:
            connections.close_all()

    # Two real worker processes; whichever leads rotates and prunes every 100 ms.
    overrides = {**FAST, "RING_INTERVAL_S": 0.1, "COMPLETED_RETENTION_S": 0}
    env = {"AWA_OVERRIDES": json.dumps(overrides)}
    workers = [worker_process("--queue", "default=4", env=env).wait_ready() for _ in range(2)]
    producers = [threading.Thread(target=producer, args=(seed,)) for seed in range(3)]
    for thread in producers:
        thread.start()
    # Producers no longer queue behind each other, so 600 jobs can commit within a few ring
    # intervals: keep producing until the ring has also turned over several times.
    wait_until(
        lambda: (
            len(committed) > 600
            and scalar("SELECT max(generation) FROM awa.queue_ring_rotations") >= 5
        ),
        timeout=60,
    )
    stop.set()
    for thread in producers:
        thread.join(30)

    def runs_so_far() -> int:
        return scalar("SELECT count(DISTINCT job_id) FROM tests_job_runs")

    wait_until(lambda: runs_so_far() == len(committed), timeout=60)
    for worker in workers:
        worker.proc.send_signal(signal.SIGTERM)
    assert [worker.wait() for worker in workers] == [0, 0]

    with connection.cursor() as cursor:
        cursor.execute("SELECT job_id, count(*) FROM tests_job_runs GROUP BY job_id")
        runs = dict(cursor.fetchall())
    assert runs == {job_id: 1 for job_id in committed}
    generations = scalar("SELECT max(generation) FROM awa.queue_ring_rotations")
    retained = scalar("SELECT count(*) FROM awa.done_entries")
    assert generations >= 5, "the ring should have rotated repeatedly"
    assert retained < len(committed), "prune should have reclaimed completed history"
    # Whatever history is still retained says completed; nothing is waiting or open.
    remaining = {job.state for job in awa.get_jobs(committed)}
    assert remaining <= {"completed"}


# -- progress, checkpoint and cancel ----------------------------------------------------------


def notes(job_id: int) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT note FROM tests_job_runs WHERE job_id = %s ORDER BY id", [job_id])
        return [row[0] for row in cursor.fetchall()]


@override_settings(AWA=FAST)
def test_checkpoint_survives_a_retry_and_is_cleared_on_success():
    job_id = checkpointed_retry.enqueue()
    run_burst(burst_wait_s=5)
    assert notes(job_id) == [
        "checkpoint=None progress=None None",
        "checkpoint={'page': 3} progress=10 page 3 of 9",
    ]
    assert awa.get_job(job_id).state == "completed"
    assert scalar("SELECT count(*) FROM awa.attempt_state WHERE job_id = %s", [job_id]) == 0


def test_cancel_queued_and_scheduled_jobs_never_run():
    queued = record.enqueue(n=1)
    scheduled = awa.enqueue(record, args={"n": 2}, run_at=timedelta(milliseconds=1))
    assert awa.cancel(queued) and awa.cancel(scheduled)
    pause(0.01)
    run_burst()
    assert {awa.get_job(queued).state, awa.get_job(scheduled).state} == {"cancelled"}
    assert notes(queued) == notes(scheduled) == []
    assert not awa.cancel(queued)  # already cancelled


def test_cancel_running_job_raises_its_flag_and_ignores_its_late_completion():
    with override_settings(AWA=FAST):
        worker = BackgroundWorker().start()
        try:
            job_id = cooperative.enqueue()
            wait_until(lambda: notes(job_id) == ["coop-start"])
            assert awa.cancel(job_id, reason="operator changed their mind")
            wait_until(lambda: notes(job_id) == ["coop-start", "coop-saw-cancel"])
        finally:
            summary = worker.stop()
    job = awa.get_job(job_id)
    assert job.state == "cancelled"
    assert job.errors[-1]["reason"] == "operator changed their mind"
    assert summary.stale == 1  # the handler's normal return after the cancel


def test_cancel_wins_against_a_concurrent_promotion():
    """The job is promoted while cancel waits for its deferred row: cancel still lands."""
    job_id = awa.enqueue(record, args={"n": 1}, run_at=timedelta(milliseconds=1))
    pause(0.01)
    promoted = threading.Event()
    release = threading.Event()

    def promote_and_hold() -> None:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT awa.promote_due('scheduled', 10)")
                promoted.set()
                release.wait(10)
        finally:
            connections.close_all()

    promoter = threading.Thread(target=promote_and_hold)
    promoter.start()
    assert promoted.wait(10)
    outcome: list[bool] = []
    canceller = threading.Thread(
        target=lambda: (outcome.append(awa.cancel(job_id)), connections.close_all())
    )
    canceller.start()
    pause(0.2)  # cancel now waits on the promoter's row lock
    release.set()
    promoter.join(10)
    canceller.join(10)
    assert outcome == [True]
    run_burst()
    assert awa.get_job(job_id).state == "cancelled"
    assert notes(job_id) == []


def test_cancelled_queued_job_reports_reason_and_time():
    job_id = record.enqueue(n=1)
    awa.cancel(job_id, reason="duplicate order")
    job = awa.get_job(job_id)
    assert job.errors[-1]["reason"] == "duplicate order"
    assert job.finalized_at is not None


def test_cancel_finished_or_unknown_job_returns_false():
    assert not awa.cancel(987654321)
    job_id = noop.enqueue(n=1)
    run_burst()
    assert not awa.cancel(job_id)


def test_a_slot_in_retention_is_reported_as_such_before_the_scans_for_live_rows():
    done_id = awa.enqueue("k.p", args={})
    (job,) = claim()
    complete(job)
    awa.enqueue("k.w", args={})  # same slot, never claimed
    rings()  # seal slot 0
    # The retention proof is the cheap one: it answers before the pending row is looked for.
    assert rings(completed_retention_s=3600).queue_prune == "retention"
    assert rings(completed_retention_s=0).queue_prune == "pending_ready"
    assert awa.get_job(done_id).state == "completed"
