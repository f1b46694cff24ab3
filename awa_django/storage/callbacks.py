"""Execution plane, external waits: registering, parking, resuming and resolving callbacks.

A callback lives on its attempt's lease (``callback_id``, ``callback_timeout_at``); every call
here names the attempt by ``(job_id, run_lease)`` and the callback by its id, so a token of an
older attempt, or one its handler replaced, can never touch the current one. Every function
builds a ``Statement``: the worker runs its side on its autocommit pool; external resolutions
run theirs on a Django cursor, inside the caller's transaction, and close attempts through the
worker's close statement on that cursor (``storage.execution.close_attempts``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, Generic

from awa_django.sql import queries
from awa_django.storage.queue import CLAIMED_JOB_JSON
from awa_django.storage.statement import (
    J,
    RowsOf,
    Statement,
    any_row,
    first_text,
    first_value,
    rows_of,
)

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


def register_callback(
    ref: CallbackRef, *, timeout_s: float, claimed_by: str
) -> Statement[datetime | None]:
    """Register ``ref`` on its open attempt; answers its timeout, None if the attempt closed."""
    params = {**ref.params(), "timeout_s": timeout_s, "claimed_by": claimed_by}
    return Statement(sql=_SQL["register_callback"], params=params, read=first_value)


def park_callback(ref: CallbackRef) -> Statement[str]:
    """Mark ``ref`` parked; answers its status (``waiting`` when it is now parked)."""
    return Statement(sql=_SQL["park_callback"], params=ref.params(), read=first_text)


def _status_and_payload(rows: list[Any]) -> tuple[str, Any]:
    ((status, payload),) = rows  # the function always answers one row
    return str(status), payload


def take_callback_payload(ref: CallbackRef) -> Statement[tuple[str, Any]]:
    """A resumed payload, taken once: ``("resumed", payload)``; else ``(status, None)``."""
    return Statement(
        sql=_SQL["take_callback_payload"], params=ref.params(), read=_status_and_payload
    )


def _locked(rows: RowsOf[J], found: list[dict[str, Any]]) -> LockedCallback[J]:
    (values,) = found  # the function always answers one row
    status = values.pop("status")
    job = rows(tuple(values))(tuple(values.values())) if status == "waiting" else None
    return LockedCallback(status=status, job=job)


def lock_callback(ref: CallbackRef, *, rows: RowsOf[J]) -> Statement[LockedCallback[J]]:
    """Lock ``ref``'s lease until the transaction ends and say where the callback stands;
    ``rows`` makes the attempt from its columns (``core.claimed_job.claimed_job_rows``)."""
    return Statement(
        sql=_SQL["lock_callback"],
        params=ref.params(),
        read=partial(_locked, rows),
        rows=rows_of(dict),
        json=CLAIMED_JOB_JSON,
    )


def resume_callback(ref: CallbackRef, payload_json: str) -> Statement[bool]:
    """Store a payload (JSON text) for a sequential wait and wake its worker at commit; False
    when the callback is parked (no handler is waiting for a payload)."""
    params = {**ref.params(), "payload": payload_json}
    return Statement(sql=_SQL["resume_callback"], params=params, read=any_row)


def extend_callback(ref: CallbackRef, *, timeout_s: float) -> Statement[datetime]:
    """Move ``ref``'s timeout to now + ``timeout_s`` (the callback must be locked and waiting:
    the row is there)."""
    params = {**ref.params(), "timeout_s": timeout_s}
    return Statement(sql=_SQL["extend_callback"], params=params, read=first_value)


def _attempts(rows: list[Any]) -> set[tuple[int, int]]:
    return {(int(job_id), int(lease)) for job_id, lease in rows}


def lock_timed_out_callbacks(
    attempts: Sequence[tuple[int, int]],
) -> Statement[set[tuple[int, int]]]:
    """Lock the leases of these expired callbacks (in the caller's transaction), skipping any an
    external resolution holds; answers the attempts locked."""
    params = {"job_id": [job for job, _ in attempts], "run_lease": [lease for _, lease in attempts]}
    return Statement(sql=_SQL["lock_timed_out_callbacks"], params=params, read=_attempts)
