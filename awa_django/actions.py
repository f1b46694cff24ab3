"""Operator actions on single jobs, callable from code, the shell and (later) the admin."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import partial
from typing import Any, Final

from django.db import connections, transaction
from django.utils import timezone

from awa_django.conf import get_settings
from awa_django.enqueue import _bind, _chosen_unique, _options, _resolve_job
from awa_django.exceptions import InvalidJob
from awa_django.jobs import Job
from awa_django.signals import job_cancelled
from awa_django.storage.jobs import get_jobs
from awa_django.storage.queue import cancel_job
from awa_django.storage.unique import unique_holder
from awa_django.telemetry import get_telemetry
from awa_django.unique import Unique, unique_key

CANCELLED: Final = frozenset({"cancelled_running", "cancelled_queued", "cancelled_scheduled"})


def cancel(job_id: int, *, reason: str = "cancelled by operator") -> bool:
    """Cancel a job whatever it is doing; returns False when it had already finished (or does
    not exist).

    A queued or scheduled job is made unclaimable and never runs. A running job's attempt is
    closed as cancelled at once and its worker is notified: the handler sees
    ``ctx.is_cancelled()`` and whatever it reports afterwards is ignored as stale.
    """
    alias = get_settings().DATABASE_ALIAS
    with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
        if cancel_job(cursor, job_id=job_id, reason=reason) not in CANCELLED:
            return False
        telemetry = get_telemetry()
        if job_cancelled.has_listeners() or telemetry.enabled:
            # Read only when someone listens; both run once the caller's transaction commits.
            (record,) = get_jobs(cursor, [job_id])
            telemetry_cb = partial(telemetry.cancelled, kind=record.kind, queue=record.queue)
            transaction.on_commit(telemetry_cb, using=alias)
            transaction.on_commit(
                partial(
                    job_cancelled.send,
                    sender=Job,
                    job_id=job_id,
                    run_lease=record.run_lease,
                    kind=record.kind,
                    queue=record.queue,
                    attempt=record.attempt,
                    reason=reason,
                ),
                using=alias,
            )
        return True


def cancel_unique(
    kind_or_job: str | Job[Any, Any],
    *,
    args: Mapping[str, Any] | None = None,
    queue: str | None = None,
    unique: Unique | None = None,
    at: datetime | None = None,
    reason: str = "cancelled by operator",
) -> int | None:
    """Cancel the job holding a unique key, without knowing its id; returns that job's id, or
    None when no job holds the key or it had already finished.

    The key is computed as ``enqueue`` computes it: from the job's kind, ``args``, ``queue``
    and ``unique`` (default: the job's own), with the period bucket of ``at`` (default: now).
    """
    kind, job = _resolve_job(kind_or_job)
    bound = _bind(kind, job, args)
    chosen = _chosen_unique(job, unique)
    if chosen is None:
        raise InvalidJob(
            f"job {kind!r} is not unique: pass the unique= it was enqueued with", field="unique"
        )
    options = _options(
        kind,
        job,
        queue_name=queue,
        priority=None,
        max_attempts=None,
        run_at=None,
        metadata=None,
        tags=None,
    )
    key = unique_key(chosen, kind=kind, queue=options.queue, args=bound, now=at or timezone.now())
    alias = get_settings().DATABASE_ALIAS
    with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
        holder = unique_holder(cursor, key=key.digest)
        if holder is None or not cancel(holder, reason=reason):
            return None
        return holder
