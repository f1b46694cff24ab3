"""Running jobs in the calling thread through the worker's own path: claim, execute, close.

Used by ``awa_django.testing`` (``run_jobs``, ``work_one``) and by eager mode. Everything runs
on the caller's Django connection for ``AWA["DATABASE_ALIAS"]``: inside a test transaction the
jobs enqueued there are visible and the claims and closures join it; outside one each statement
autocommits, as in a worker. The statements, the result mapping (outcomes, retry backoff,
snooze, cancel) and the run_lease guard are the worker's; what differs is only where the
handler runs (this thread, no thread pool, no heartbeats or deadlines being enforced).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from asgiref.sync import async_to_sync
from django.db import DatabaseError, connections, transaction
from django.db.backends.utils import CursorWrapper

from awa_django.conf import get_settings
from awa_django.core.claimed_job import ClaimedJob, claimed_job_rows
from awa_django.core.closed_attempts import report_closed
from awa_django.core.completion import result_to_completion
from awa_django.core.outcome import Outcome
from awa_django.core.retry import RetryPolicy
from awa_django.declarations.jobs import DeclaredJob, registry
from awa_django.storage import eager as eager_storage
from awa_django.storage.backlog import promote_due
from awa_django.storage.eager import NextReady
from awa_django.storage.execution import close_attempts
from awa_django.storage.queue import ClaimRequest, claim_ready
from awa_django.storage.runtime import sync_queue_policies
from awa_django.storage.statement import run
from awa_django.worker.executor import context_for, execute_in_calling_thread
from awa_django.worker.job_log import JobLog, JobLogConfig
from awa_django.worker.process import worker_identity


def _publish_pending(cursor: CursorWrapper) -> None:
    """Publish what the cursor's open transaction enqueued, so that a claim inside it (a test's
    transaction) sees those jobs; outside a transaction every write has committed already."""
    if cursor.db.in_atomic_block:
        run(cursor, eager_storage.PUBLISH_PENDING)


@dataclass(frozen=True, slots=True, kw_only=True)
class RanJob:
    """One attempt run in-process and how it closed."""

    job_id: int
    kind: str
    queue: str
    attempt: int
    outcome: Outcome
    # What the handler raised (or returned as an outcome); None when it completed.
    error: BaseException | None
    # When a retried or snoozed job runs again, on the database's clock; None otherwise.
    run_at: datetime | None
    # False when the closure was stale: someone else (rescue, cancel) closed the attempt first.
    closed: bool


class InProcessRunner:
    """Claims and runs jobs on this thread's Django connection."""

    def __init__(
        self,
        resolve: Callable[[str], DeclaredJob[Any, Any] | None] = registry.get,
        *,
        database: str | None = None,
    ) -> None:
        conf = get_settings()
        # The alias of the queues it runs (a queue's "database"); AWA["DATABASE_ALIAS"] when None.
        self.alias = database or conf.DATABASE_ALIAS
        self._queues = conf.QUEUES
        self._policy = RetryPolicy.from_settings(conf)
        self._resolve = resolve
        self._job_log = JobLog(JobLogConfig.from_settings(conf))
        # The prefix is older than the names eager and in-process: it is stored as the claim's
        # claimed_by, which the admin and django.tasks (worker_ids) show, so it stays.
        self.identity = f"inline:{worker_identity()}"

    def publish_policies(self) -> None:
        """Publish the queues' DLQ policies from settings, as a worker does when it starts, so
        terminal failures are routed the same way."""
        conf = get_settings()
        with connections[self.alias].cursor() as cursor:
            run(
                cursor,
                # Each database gets the switches of its own queues only.
                sync_queue_policies(
                    {
                        name: queue.dlq
                        for name, queue in conf.QUEUES.items()
                        if conf.queue_database(name) == self.alias
                    }
                ),
            )

    def promote(self) -> int:
        """Move every due scheduled and retryable job into its lane; returns how many moved."""
        with connections[self.alias].cursor() as cursor:
            limit = get_settings().PROMOTE_BATCH_SIZE
            return sum(run(cursor, statement) for statement in promote_due(limit=limit))

    def make_due(self, job_ids: Sequence[int] | None = None) -> int:
        """Make deferred jobs (all of them when None) due now; returns how many moved."""
        with connections[self.alias].cursor() as cursor:
            return run(cursor, eager_storage.make_due(job_ids=job_ids))

    def next_ready(self, queue: str) -> NextReady | None:
        with connections[self.alias].cursor() as cursor:
            _publish_pending(cursor)
            return run(cursor, eager_storage.next_ready(queue=queue))

    def claim(self, queue: str, limit: int) -> list[ClaimedJob]:
        """Claim as a worker of ``queue`` would: its deadline, priority aging and sequential
        lanes (rate limits are a worker's pacing and do not apply here)."""
        options = self._queues[queue]
        request = ClaimRequest(
            queue=queue,
            claimed_by=self.identity,
            deadline_s=options.deadline_s,
            aging_s=options.aging_interval_s,
            sequential=options.sequential_lanes,
        )
        with connections[self.alias].cursor() as cursor:
            # What the cursor's transaction enqueued is claimable only once published.
            _publish_pending(cursor)
            return run(cursor, claim_ready(request, rows=claimed_job_rows, limit=limit))

    def work(self, job: ClaimedJob) -> RanJob:
        """Run a claimed job's handler here and close its attempt."""
        ctx = context_for(job, claimed_by=self.identity)
        handler = self._resolve(job.kind)
        self._job_log.started(job)
        started = time.monotonic()
        if connections[self.alias].in_atomic_block:
            # Inside a (test) transaction a database error in the handler would abort the whole
            # transaction; a savepoint confines it to the handler's own writes.
            with transaction.atomic(using=self.alias):
                result = execute_in_calling_thread(job, handler, ctx)
                if isinstance(result.outcome, DatabaseError):
                    transaction.set_rollback(True, using=self.alias)
        else:
            result = execute_in_calling_thread(job, handler, ctx)
        duration_s = time.monotonic() - started
        progress, checkpoint, changed = ctx.state.take_unflushed()
        completion = result_to_completion(
            job,
            result,
            now=datetime.now(UTC),
            policy=self._policy,
            progress=progress if changed else None,
            checkpoint=checkpoint if changed else None,
        )
        with connections[self.alias].cursor() as cursor:
            closed = run(cursor, close_attempts([completion]))
        self._job_log.finished(job, result.outcome, completion.outcome, duration_s)
        async_to_sync(report_closed)([completion], closed, rescue_reasons={})
        return RanJob(
            job_id=job.job_id,
            kind=job.kind,
            queue=job.queue,
            attempt=job.attempt,
            outcome=completion.outcome,
            error=result.outcome,
            run_at=closed.get((job.job_id, job.run_lease)),
            closed=(job.job_id, job.run_lease) in closed,
        )

    def drain(
        self,
        queues: Sequence[str],
        *,
        kinds: Collection[str] | None = None,
        max_jobs: int | None = None,
    ) -> list[RanJob]:
        """Promote due jobs and run every ready job of ``queues`` until none is left (or
        ``max_jobs`` ran). With ``kinds``, a queue is worked only while its next job is of one
        of them: jobs are claimed in queue order, never skipped."""
        ran: list[RanJob] = []
        self.publish_policies()
        while max_jobs is None or len(ran) < max_jobs:
            self.promote()
            progressed = False
            for queue in queues:
                limit = get_settings().CLAIM_BATCH_SIZE
                if max_jobs is not None:
                    limit = min(limit, max_jobs - len(ran))
                if limit <= 0:
                    break
                if kinds is not None:
                    head = self.next_ready(queue)
                    if head is None or head.kind not in kinds:
                        continue
                    limit = 1
                for job in self.claim(queue, limit):
                    ran.append(self.work(job))
                    progressed = True
            if not progressed:
                break
        self.report()
        return ran

    def run_eagerly(self, queue: str, job_ids: Collection[int]) -> list[RanJob]:
        """Run the committed jobs ``job_ids`` of ``queue`` now, retrying a failed attempt at
        once (no backoff) until the job completes or runs out of attempts. Jobs claimed ahead
        of them in the queue run (and retry) too; jobs another process claimed first are left
        to it."""
        pending = set(job_ids)
        ran: list[RanJob] = []
        self.publish_policies()
        while pending:
            jobs = self.claim(queue, len(pending))
            if not jobs:
                break
            for job in jobs:
                attempt = self.work(job)
                ran.append(attempt)
                # A job claimed ahead of ours is seen through the same way: this run owns it.
                if attempt.outcome is Outcome.RETRYABLE and attempt.closed:
                    pending.add(job.job_id)
                    self.make_due([job.job_id])
                    self.promote()
                else:
                    pending.discard(job.job_id)
        self.report()
        return ran

    def report(self) -> None:
        """Log what the job log holds back until a run ends: lines suppressed in a failure
        storm and, in summary mode, the summary."""
        self._job_log.flush()
