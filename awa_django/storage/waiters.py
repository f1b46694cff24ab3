"""Waiting sessions (``awa.job_waiters``) and the channel the closers notify them on."""

from __future__ import annotations

from typing import Any, Final

from psycopg import AsyncConnection

from awa_django.sql import queries

_SQL = queries("waiters")

# The channel awa.close_batch and awa.cancel_job notify, with the id of the job that ended.
JOB_DONE_CHANNEL: Final = "awa_job_done"


async def register_waiter(conn: AsyncConnection[Any], job_id: int) -> None:
    """Record ``conn``'s session as waiting on ``job_id`` (and forget ended sessions)."""
    await conn.execute(_SQL["register_waiter"], {"job_id": job_id})


async def unregister_waiter(conn: AsyncConnection[Any], job_id: int) -> None:
    await conn.execute(_SQL["unregister_waiter"], {"job_id": job_id})
