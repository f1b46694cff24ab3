"""The wake locks a waiting worker holds on its own session (see ``sql/queries/wake.sql``)."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from awa_django.sql import queries

_SQL = queries("wake")


async def arm_wake(conn: AsyncConnection[Any], *, queue: str, candidate: bool) -> str:
    """Try to become ``queue``'s waiting worker on this session: ``'armed'``, ``'busy'`` or
    ``'taken'``. ``candidate`` says this session holds the candidate lock already."""
    cursor = await conn.execute(_SQL["arm_wake"], {"queue": queue, "candidate": candidate})
    row = await cursor.fetchone()
    assert row is not None  # one row, always
    return str(row[0])


async def release_wake(conn: AsyncConnection[Any], *, queue: str, armed: bool) -> None:
    """Give back ``queue``'s candidate lock, and its wake lock when ``armed``, and wake the
    queue's other workers so that one of them takes over waiting."""
    await conn.execute(_SQL["release_wake"], {"queue": queue, "armed": armed})


async def try_session_locks(
    conn: AsyncConnection[Any], *, leader_key: int | None, queues: list[str]
) -> tuple[bool, list[str]]:
    """Try the leader lock ``leader_key`` (unless None) and the candidate lock of each of
    ``queues`` on this session, in one statement: (leader lock won, the queues whose candidate
    lock was won)."""
    cursor = await conn.execute(
        _SQL["try_session_locks"], {"leader_key": leader_key, "queues": queues}
    )
    row = await cursor.fetchone()
    assert row is not None  # one row, always
    return bool(row[0]), list(row[1])
