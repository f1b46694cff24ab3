"""Operator actions on single jobs, callable from code, the shell and (later) the admin."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any, Final

from django.db import connections, transaction
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from awa_django.conf import get_settings
from awa_django.declarations.enqueue_options import EnqueueOptions, RunAt
from awa_django.declarations.jobs import DeclaredJob
from awa_django.declarations.resolve import bind_args, resolve_job
from awa_django.declarations.unique import Unique, unique_key
from awa_django.exceptions import InvalidJob
from awa_django.limits import is_job_id
from awa_django.ops.dlq import retry_options
from awa_django.signals import job_cancelled, workflow_finished
from awa_django.storage import dlq as dlq_storage
from awa_django.storage.backlog import run_now as run_deferred_now
from awa_django.storage.jobs import jobs_by_id
from awa_django.storage.queue import cancel_jobs
from awa_django.storage.statement import Atomic, run, run_atomic
from awa_django.storage.unique import unique_holder
from awa_django.storage.workflows import WORKFLOWS_FINISHED
from awa_django.telemetry import get_telemetry

CANCELLED: Final = frozenset({"cancelled_running", "cancelled_queued", "cancelled_scheduled"})


def cancel(
    job_id: int, *, reason: str = "cancelled by operator", database: str | None = None
) -> bool:
    """Cancel a job whatever it is doing; returns False when it had already finished (or does
    not exist).

    A queued or scheduled job is made unclaimable and never runs. A running job's attempt is
    closed as cancelled at once and its worker is notified: the handler sees
    ``ctx.is_cancelled()`` and whatever it reports afterwards is ignored as stale.

    Job ids count per database: ``database`` names the job's (default
    ``AWA["DATABASE_ALIAS"]``), as for ``run_now`` and ``retry``.
    """
    return bool(cancel_many([job_id], reason=reason, database=database))


def cancel_many(
    job_ids: Sequence[int], *, reason: str = "cancelled by operator", database: str | None = None
) -> list[int]:
    """Cancel, as ``cancel`` cancels one, each of ``job_ids``, all in one transaction of one
    statement (and, when someone listens, one read of the records the signals carry); answers
    the ids cancelled (one already finished, or unknown, is skipped). A bulk cancel's page
    costs a few statements, not a transaction per job."""
    alias = get_settings().operator_database(database)
    wanted = [job_id for job_id in job_ids if is_job_id(job_id)]
    if not wanted:
        return []
    with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
        outcomes = run(cursor, cancel_jobs(job_ids=wanted, reason=reason))
        cancelled = [job_id for job_id, outcome in outcomes if outcome in CANCELLED]
        if not cancelled:
            return []
        # A step's cancel may end its workflow (its dependents are cancelled with it).
        announce_finished(cursor, alias)
        telemetry = get_telemetry()
        if job_cancelled.has_listeners() or telemetry.enabled:
            # Read only when someone listens; both run once the caller's transaction commits.
            for record in run(cursor, jobs_by_id(cancelled)):
                telemetry_cb = partial(telemetry.cancelled, kind=record.kind, queue=record.queue)
                transaction.on_commit(telemetry_cb, using=alias)
                # send_robust, as for job_enqueued: the cancel is committed by then.
                transaction.on_commit(
                    partial(
                        job_cancelled.send_robust,
                        sender=DeclaredJob,
                        job_id=record.job_id,
                        run_lease=record.run_lease,
                        kind=record.kind,
                        queue=record.queue,
                        attempt=record.attempt,
                        reason=reason,
                    ),
                    using=alias,
                )
        return cancelled


def announce_finished(cursor: CursorWrapper, alias: str) -> None:
    """Send ``workflow_finished`` once the caller's transaction commits, for each workflow it
    finished so far; one statement, run only when the signal has receivers."""
    if not (workflow_finished.receivers and workflow_finished.has_listeners()):
        return
    for workflow in run(cursor, WORKFLOWS_FINISHED):
        transaction.on_commit(
            partial(
                workflow_finished.send_robust,
                sender=DeclaredJob,
                workflow_id=workflow.workflow_id,
                name=workflow.name,
                state=workflow.state,
            ),
            using=alias,
        )


def cancel_unique(
    kind_or_job: str | DeclaredJob[Any, Any],
    *,
    args: Mapping[str, Any] | None = None,
    queue: str | None = None,
    unique: Unique | None = None,
    at: datetime | None = None,
    reason: str = "cancelled by operator",
    database: str | None = None,
) -> int | None:
    """Cancel the job holding a unique key, without knowing its id; returns that job's id, or
    None when no job holds the key or it had already finished.

    The key is computed as ``enqueue`` computes it: from the job's kind, ``args``, ``queue``
    and ``unique`` (default: the job's own), with the period bucket of ``at`` (default: now),
    in ``database`` (default: that queue's database).
    """
    kind, job = resolve_job(kind_or_job)
    bound = bind_args(kind, job, args).args
    options = EnqueueOptions(queue=queue, unique=unique).resolve(kind, job)
    if options.unique is None:
        raise InvalidJob(
            f"job {kind!r} is not unique: pass the unique= it was enqueued with", field="unique"
        )
    key = unique_key(
        options.unique, kind=kind, queue=options.queue, args=bound, now=at or timezone.now()
    )
    alias = get_settings().operator_database(database, queue=options.queue)
    with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
        holder = run(cursor, unique_holder(key=key.digest))
        if holder is None or not cancel(holder, reason=reason, database=alias):
            return None
        return holder


def run_now(job_id: int, *, database: str | None = None) -> bool:
    """Run a ``scheduled`` or ``retryable`` job now instead of at its ``run_at``: it joins the
    back of its lane at once (a paused queue's job waits there until the queue is resumed).
    Returns False for any other state (or no such job)."""
    alias = get_settings().operator_database(database)
    if not is_job_id(job_id):
        return False
    with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
        return bool(run(cursor, run_deferred_now([job_id])))


def retry(
    job_id: int,
    *,
    run_at: RunAt = None,
    queue: str | None = None,
    priority: int | None = None,
    database: str | None = None,
) -> bool:
    """Run a finished-unsuccessfully job again: one held in the DLQ, or a ``failed`` or
    ``cancelled`` one (still in history). Returns False for any other state (or no such job).

    It goes back as a fresh attempt (see ``awa.dlq.retry``, whose options it takes): same id,
    error history kept, attempt count reset, a larger run_lease than any before.
    """
    alias = get_settings().operator_database(database)
    when, to_queue, to_priority = retry_options(run_at, queue, priority, alias=alias)
    if not is_job_id(job_id):
        return False
    return bool(_retry_ids([job_id], alias, when, to_queue, to_priority))


def retry_many(job_ids: Sequence[int], *, database: str | None = None) -> list[int]:
    """Retry, as ``retry`` retries one, each of ``job_ids`` held in the DLQ or ``failed`` or
    ``cancelled``, all in one transaction; answers the ids retried (a job in another state, or
    none, is skipped). A bulk retry's page costs a few statements, not a few per job."""
    alias = get_settings().operator_database(database)
    wanted = [job_id for job_id in job_ids if is_job_id(job_id)]
    if not wanted:
        return []
    return _retry_ids(wanted, alias, None, None, None)


def _retry_ids(
    job_ids: list[int],
    alias: str,
    when: datetime | None,
    to_queue: str | None,
    to_priority: int | None,
) -> list[int]:
    # The failed and cancelled ones are moved into the DLQ first, so that every retry is the
    # DLQ's: one path, whatever state the job finished in.
    held_again = Atomic(
        first=(
            dlq_storage.move_jobs(job_ids, states=["failed", "cancelled"], reason="operator_retry"),
        ),
        last=dlq_storage.retry_entries(job_ids, run_at=when, queue=to_queue, priority=to_priority),
    )
    with connections[alias].cursor() as cursor:
        return run_atomic(cursor, held_again)
