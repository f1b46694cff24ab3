"""Control plane: the maintenance leader lock, ring rotation and prune, retention cleanup."""

from __future__ import annotations

from typing import Any

from django.db.backends.utils import CursorWrapper
from psycopg import AsyncConnection

from awa_django.sql import queries
from awa_django.storage.lanes import forget_lanes

_SQL = queries("control")


async def _scalar(
    conn: AsyncConnection[Any], block: str, params: dict[str, Any] | None = None
) -> Any:
    cursor = await conn.execute(_SQL[block], params)
    row = await cursor.fetchone()
    return None if row is None else row[0]


async def try_leader_lock(conn: AsyncConnection[Any], *, key: int) -> bool:
    """Try the session-scoped leader lock on this connection."""
    return bool(await _scalar(conn, "try_leader_lock", {"key": key}))


async def release_leader_lock(conn: AsyncConnection[Any], *, key: int) -> bool:
    return bool(await _scalar(conn, "release_leader_lock", {"key": key}))


async def take_leader_lease(
    conn: AsyncConnection[Any], *, key: int, instance_id: str, ttl_s: float
) -> bool:
    """Take or renew the leader lease of ``instance_id`` (a runtime_instances row) unless another
    instance holds one younger than ``ttl_s``; one transaction, safe behind a transaction
    pooler."""
    async with conn.transaction():
        await conn.execute(_SQL["lock_leader_lease"], {"key": key})
        cursor = await conn.execute(
            _SQL["take_leader_lease"], {"instance_id": instance_id, "ttl_s": ttl_s}
        )
        return await cursor.fetchone() is not None


async def release_leader_lease(conn: AsyncConnection[Any], *, instance_id: str) -> None:
    await conn.execute(_SQL["release_leader_lease"], {"instance_id": instance_id})


async def ping(conn: AsyncConnection[Any]) -> None:
    await _scalar(conn, "ping")


async def rotate_queue_ring(conn: AsyncConnection[Any], *, keep: int) -> str:
    """One rotation attempt; the ring's ledger keeps its newest ``keep`` generations."""
    return str(await _scalar(conn, "rotate_queue_ring", {"keep": keep}))


async def prune_queue_ring(
    conn: AsyncConnection[Any],
    *,
    completed_retention_s: float,
    failed_retention_s: float,
    lock_timeout_ms: int,
) -> str:
    return str(
        await _scalar(
            conn,
            "prune_queue_ring",
            {
                "completed_retention_s": completed_retention_s,
                "failed_retention_s": failed_retention_s,
                "lock_timeout_ms": lock_timeout_ms,
            },
        )
    )


async def rotate_lease_ring(conn: AsyncConnection[Any], *, keep: int) -> str:
    """One rotation attempt; the ring's ledger keeps its newest ``keep`` generations."""
    return str(await _scalar(conn, "rotate_lease_ring", {"keep": keep}))


async def prune_lease_ring(conn: AsyncConnection[Any], *, lock_timeout_ms: int) -> str:
    return str(await _scalar(conn, "prune_lease_ring", {"lock_timeout_ms": lock_timeout_ms}))


async def delete_expired_dlq(conn: AsyncConnection[Any], *, retention_s: float, limit: int) -> int:
    """Delete one bounded batch of expired DLQ entries; returns how many went."""
    cursor = await conn.execute(
        _SQL["delete_expired_dlq"], {"retention_s": retention_s, "limit": limit}
    )
    return cursor.rowcount


async def delete_expired_terminal_history(
    conn: AsyncConnection[Any], *, retention_s: float, limit: int
) -> int:
    """Delete one bounded batch of failed/cancelled history past its retention."""
    cursor = await conn.execute(
        _SQL["delete_expired_terminal_history"], {"retention_s": retention_s, "limit": limit}
    )
    return cursor.rowcount


def reset_all(cursor: CursorWrapper) -> None:
    """Delete every job and put the rings back at genesis (test suites and benchmarks only)."""
    cursor.execute(_SQL["reset_all"])
    # It dropped every lane: this process must create them again before its producers use them.
    forget_lanes()
