"""Waiting sessions (``awa.job_waiters``) and the channel the closers notify them on."""

from __future__ import annotations

from typing import Final

from awa_django.sql import queries
from awa_django.storage.statement import Statement, nothing

_SQL = queries("waiters")

# The channel awa.close_batch and awa.cancel_job notify, with the id of the job that ended.
JOB_DONE_CHANNEL: Final = "awa_job_done"


# Run before ``register_waiter``, on the same session.
LISTEN_JOB_DONE: Final[Statement[None]] = Statement(sql=_SQL["listen_job_done"], read=nothing)


def register_waiter(job_id: int) -> Statement[None]:
    """Record the running session as waiting on ``job_id`` (and forget ended sessions)."""
    return Statement(sql=_SQL["register_waiter"], params={"job_id": job_id}, read=nothing)


def unregister_waiter(job_id: int) -> Statement[None]:
    return Statement(sql=_SQL["unregister_waiter"], params={"job_id": job_id}, read=nothing)
