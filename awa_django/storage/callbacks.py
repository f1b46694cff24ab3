"""Execution plane, external waits: registering, parking, resuming and resolving callbacks.

A callback lives on its attempt's lease (``callback_id``, ``callback_timeout_at``); every call
here names the attempt by ``(job_id, run_lease)`` and the callback by its id, so a token of an
older attempt, or one its handler replaced, can never touch the current one. The worker's side
runs on its autocommit pool; external resolutions run on a Django cursor, inside the caller's
transaction, and close attempts through the worker's close statement on that cursor
(``storage.execution.close_attempts``, run by ``storage.statement.run``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic

from django.db.backends.utils import CursorWrapper
from psycopg import AsyncConnection

from awa_django.sql import queries
from awa_django.storage.queue import CLAIMED_JOB_JSON
from awa_django.storage.statement import J, RowsOf, Statement, all_rows, rows_of, run

_SQL = queries("callbacks")

# What the caller's row maker makes of the locked attempt (core's ClaimedJob).


@dataclass(frozen=True, slots=True)
class CallbackRef:
    """One callback of one attempt."""

    job_id: int
    run_lease: int
    callback_id: uuid.UUID

    def params(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "run_lease": self.run_lease, "callback_id": self.callback_id}


@dataclass(frozen=True, slots=True)
class LockedCallback(Generic[J]):
    """A callback locked for resolution: its status and, when ``waiting``, its attempt."""

    status: str
    job: J | None


async def register_callback(
    conn: AsyncConnection[Any], ref: CallbackRef, *, timeout_s: float, claimed_by: str
) -> datetime | None:
    """Register ``ref`` on its open attempt; returns its timeout, None if the attempt closed."""
    cursor = await conn.execute(
        _SQL["register_callback"],
        {**ref.params(), "timeout_s": timeout_s, "claimed_by": claimed_by},
    )
    row = await cursor.fetchone()
    return None if row is None else row[0]


async def park_callback(conn: AsyncConnection[Any], ref: CallbackRef) -> str:
    """Mark ``ref`` parked; returns its status (``waiting`` when it is now parked)."""
    cursor = await conn.execute(_SQL["park_callback"], ref.params())
    row = await cursor.fetchone()
    assert row is not None  # the function always answers
    return str(row[0])


async def take_callback_payload(conn: AsyncConnection[Any], ref: CallbackRef) -> tuple[str, Any]:
    """A resumed payload, taken once: ``("resumed", payload)``; else ``(status, None)``."""
    cursor = await conn.execute(_SQL["take_callback_payload"], ref.params())
    row = await cursor.fetchone()
    assert row is not None  # the function always answers
    return str(row[0]), row[1]


def lock_callback(cursor: CursorWrapper, ref: CallbackRef, *, rows: RowsOf[J]) -> LockedCallback[J]:
    """Lock ``ref``'s lease until the transaction ends and say where the callback stands;
    ``rows`` makes the attempt from its columns (``core.claimed_job.claimed_job_rows``)."""
    locked = Statement(
        sql=_SQL["lock_callback"],
        params=ref.params(),
        read=all_rows,
        rows=rows_of(dict),
        json=CLAIMED_JOB_JSON,
    )
    (values,) = run(cursor, locked)  # the function always answers one row
    status = values.pop("status")
    job = rows(tuple(values))(tuple(values.values())) if status == "waiting" else None
    return LockedCallback(status=status, job=job)


def resume_callback(cursor: CursorWrapper, ref: CallbackRef, payload_json: str) -> bool:
    """Store a payload (JSON text) for a sequential wait and wake its worker at commit; False
    when the callback is parked (no handler is waiting for a payload)."""
    cursor.execute(_SQL["resume_callback"], {**ref.params(), "payload": payload_json})
    return cursor.fetchone() is not None


def extend_callback(cursor: CursorWrapper, ref: CallbackRef, *, timeout_s: float) -> datetime:
    """Move ``ref``'s timeout to now + ``timeout_s`` (the callback must be locked and waiting)."""
    cursor.execute(_SQL["extend_callback"], {**ref.params(), "timeout_s": timeout_s})
    row = cursor.fetchone()
    assert row is not None  # locked and waiting: the row is there
    return row[0]  # type: ignore[no-any-return]


async def lock_timed_out_callbacks(
    conn: AsyncConnection[Any], attempts: Sequence[tuple[int, int]]
) -> set[tuple[int, int]]:
    """Lock the leases of these expired callbacks (in the caller's transaction), skipping any an
    external resolution holds; returns the attempts locked."""
    cursor = await conn.execute(
        _SQL["lock_timed_out_callbacks"],
        {"job_id": [job for job, _ in attempts], "run_lease": [lease for _, lease in attempts]},
    )
    return {(int(job_id), int(lease)) for job_id, lease in await cursor.fetchall()}
