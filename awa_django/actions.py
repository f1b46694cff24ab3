"""Operator actions on single jobs, callable from code, the shell and (later) the admin."""

from __future__ import annotations

from functools import partial
from typing import Final

from django.db import connections, transaction

from awa_django.conf import get_settings
from awa_django.jobs import Job
from awa_django.signals import job_cancelled
from awa_django.storage.jobs import get_jobs
from awa_django.storage.queue import cancel_job
from awa_django.telemetry import get_telemetry

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
