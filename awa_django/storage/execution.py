"""Execution plane: closing attempts with the run_lease guard."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from awa_django.sql import queries

_SQL = queries("execution")


class Outcome(StrEnum):
    """How an attempt closed; the first three are terminal for the job."""

    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    RETRYABLE = "retryable"
    SNOOZED = "snoozed"


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """The result of one attempt, addressed by its receipt and guarded by its run_lease."""

    job_id: int
    run_lease: int
    queue: str
    priority: int
    shard: int
    lane_seq: int
    ready_slot: int
    outcome: Outcome
    # When a retryable or snoozed job runs again; None otherwise.
    run_at: datetime | None = None
    # This attempt's error (or cancel reason) as a JSON object.
    error: dict[str, Any] | None = None


async def close_attempts(
    conn: AsyncConnection[Any], completions: Sequence[Completion]
) -> set[tuple[int, int]]:
    """Write a batch of completions in one statement; returns the (job_id, run_lease) pairs that
    closed. Anything missing was stale: an older lease, or an attempt closed by someone else."""
    cursor = await conn.execute(
        _SQL["close_attempts"],
        {
            "ready_slot": [c.ready_slot for c in completions],
            "queue": [c.queue for c in completions],
            "priority": [c.priority for c in completions],
            "shard": [c.shard for c in completions],
            "lane_seq": [c.lane_seq for c in completions],
            "job_id": [c.job_id for c in completions],
            "run_lease": [c.run_lease for c in completions],
            "outcome": [c.outcome.value for c in completions],
            "run_at": [c.run_at for c in completions],
            "error": [None if c.error is None else Jsonb(c.error) for c in completions],
        },
    )
    return {(int(job_id), int(lease)) for job_id, lease in await cursor.fetchall()}
