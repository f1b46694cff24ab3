"""Control plane, unique claims: locking keys at enqueue and recording their holders.

Nothing here runs on the worker's hot path. A claim is released by the next enqueue of its
key, which finds the holder outside its covered states (or gone with its pruned history).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from awa_django.sql import queries
from awa_django.storage.statement import Statement, nothing

_SQL = queries("unique")


def _holders(rows: list[Any]) -> dict[bytes, int]:
    return {bytes(key): int(job_id) for key, job_id in rows}


def lock_unique_keys(keys: Sequence[bytes]) -> Statement[dict[bytes, int]]:
    """Lock ``keys`` for the running transaction; answers the held ones and their holder."""
    return Statement(sql=_SQL["lock_unique_keys"], params={"keys": list(keys)}, read=_holders)


def record_unique_claims(
    *,
    keys: Sequence[bytes],
    job_ids: Sequence[int],
    kind: str,
    queue: str,
    states: Sequence[str],
    expires_at: datetime | None,
) -> Statement[None]:
    """Make ``job_ids`` the holders of ``keys`` (locked in this transaction)."""
    params = {
        "keys": list(keys),
        "job_ids": list(job_ids),
        "kind": kind,
        "queue": queue,
        "states": list(states),
        "expires_at": expires_at,
    }
    return Statement(sql=_SQL["record_unique_claims"], params=params, read=nothing)


def _holder(rows: list[Any]) -> int | None:
    return int(rows[0][0]) if rows else None


def unique_holder(*, key: bytes) -> Statement[int | None]:
    return Statement(sql=_SQL["unique_holder"], params={"key": key}, read=_holder)


def _swept(rows: list[Any]) -> tuple[int, bytes | None]:
    ((deleted, after),) = rows  # the function always returns one row
    return int(deleted), None if after is None else bytes(after)


def sweep_unique_claims(*, limit: int, after: bytes | None) -> Statement[tuple[int, bytes | None]]:
    """Delete one batch of dead claims (leader); answers how many went and where to resume
    (None: the scan reached the end)."""
    params = {"limit": limit, "after": after}
    return Statement(sql=_SQL["sweep_unique_claims"], params=params, read=_swept)
