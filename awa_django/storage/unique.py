"""Control plane, unique claims: locking keys at enqueue and recording their holders.

Nothing here runs on the worker's hot path. A claim is released by the next enqueue of its
key, which finds the holder outside its covered states (or gone with its pruned history).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db.backends.utils import CursorWrapper
from psycopg import AsyncConnection

from awa_django.sql import queries

_SQL = queries("unique")


def lock_unique_keys(cursor: CursorWrapper, keys: Sequence[bytes]) -> dict[bytes, int]:
    """Lock ``keys`` for the cursor's transaction; returns the held ones and their holder."""
    cursor.execute(_SQL["lock_unique_keys"], {"keys": list(keys)})
    return {bytes(key): int(job_id) for key, job_id in cursor.fetchall()}


def record_unique_claims(
    cursor: CursorWrapper,
    *,
    keys: Sequence[bytes],
    job_ids: Sequence[int],
    kind: str,
    queue: str,
    states: Sequence[str],
    expires_at: datetime | None,
) -> None:
    """Make ``job_ids`` the holders of ``keys`` (locked in this transaction)."""
    cursor.execute(
        _SQL["record_unique_claims"],
        {
            "keys": list(keys),
            "job_ids": list(job_ids),
            "kind": kind,
            "queue": queue,
            "states": list(states),
            "expires_at": expires_at,
        },
    )


def unique_holder(cursor: CursorWrapper, *, key: bytes) -> int | None:
    cursor.execute(_SQL["unique_holder"], {"key": key})
    row = cursor.fetchone()
    return None if row is None else int(row[0])


async def sweep_unique_claims(
    conn: AsyncConnection[Any], *, limit: int, after: bytes | None
) -> tuple[int, bytes | None]:
    """Delete one batch of dead claims (leader); returns how many went and where to resume
    (None: the scan reached the end)."""
    cursor = await conn.execute(_SQL["sweep_unique_claims"], {"limit": limit, "after": after})
    row = await cursor.fetchone()
    assert row is not None  # the function always returns one row
    return int(row[0]), None if row[1] is None else bytes(row[1])
