"""Operator actions on single jobs, callable from code, the shell and (later) the admin."""

from __future__ import annotations

from typing import Final

from django.db import connections, transaction

from awa_django.conf import get_settings
from awa_django.storage.queue import cancel_job

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
        return cancel_job(cursor, job_id=job_id, reason=reason) in CANCELLED
