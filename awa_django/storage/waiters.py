"""Waiting sessions (``awa.job_waiters``) and the channel the closers notify them on."""

from __future__ import annotations

from typing import Any, Final

from psycopg import AsyncConnection

from awa_django.sql import queries
from awa_django.storage.jobs import JobRecord

_SQL = queries("waiters")
_JOBS_SQL = queries("jobs")

# The channel awa.close_batch and awa.cancel_job notify, with the id of the job that ended.
JOB_DONE_CHANNEL: Final = "awa_job_done"


async def register_waiter(conn: AsyncConnection[Any], job_id: int) -> None:
    """Record ``conn``'s session as waiting on ``job_id`` (and forget ended sessions)."""
    await conn.execute(_SQL["register_waiter"], {"job_id": job_id})


async def unregister_waiter(conn: AsyncConnection[Any], job_id: int) -> None:
    await conn.execute(_SQL["unregister_waiter"], {"job_id": job_id})


async def fetch_job(conn: AsyncConnection[Any], job_id: int) -> JobRecord | None:
    """The current record of ``job_id``, read on ``conn`` (psycopg decodes its jsonb)."""
    cursor = await conn.execute(_JOBS_SQL["get_jobs"], {"job_ids": [job_id]})
    row = await cursor.fetchone()
    if row is None:
        return None
    assert cursor.description is not None
    names = [column.name for column in cursor.description]
    return JobRecord(**dict(zip(names, row, strict=True)))
