"""Backlog plane: the deferred table of scheduled and retryable jobs, and its promotion."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db.backends.utils import CursorWrapper
from psycopg import AsyncConnection

from awa_django.sql import queries
from awa_django.storage import copy_text
from awa_django.storage.copy_text import CopyBatch
from awa_django.storage.statement import Statement, first_int

_SQL = queries("backlog")


def copy_deferred(cursor: CursorWrapper, batch: CopyBatch, args_json: Iterable[str]) -> list[int]:
    """Add a batch of scheduled jobs with COPY; returns their ids in order."""
    cursor.execute(_SQL["reserve_job_ids"], {"count": batch.count})
    (job_ids,) = cursor.fetchone()
    # Columns in copy_deferred's order; only the id and the arguments vary by row.
    head = copy_text.fields("scheduled", batch.kind, batch.queue, batch.priority)
    tail = batch.tail()
    rows = (
        f"{job_id}\t{head}\t{copy_text.text_field(args)}\t{tail}\n"
        for job_id, args in zip(job_ids, args_json, strict=True)
    )
    copy_text.copy_rows(cursor, _SQL["copy_deferred"], rows)
    return list(job_ids)


def promote_due(*, limit: int) -> tuple[Statement[int], Statement[int]]:
    """Move due scheduled, then retryable, jobs into the ready ring: two statements, each
    answering how many it moved (at most ``limit``). Every promoter (leader, burst, in-process)
    runs them in this order."""
    params = {"limit": limit}
    return (
        Statement(sql=_SQL["promote_due_scheduled"], params=params, read=first_int),
        Statement(sql=_SQL["promote_due_retryable"], params=params, read=first_int),
    )


async def seconds_until_next_due(
    conn: AsyncConnection[Any], *, queues: Sequence[str]
) -> float | None:
    """Seconds until the earliest deferred job of ``queues`` is due, or None when there is none."""
    cursor = await conn.execute(_SQL["seconds_until_next_due"], {"queues": list(queues)})
    row = await cursor.fetchone()
    return None if row is None or row[0] is None else float(row[0])


def run_now(cursor: CursorWrapper, job_ids: Sequence[int]) -> list[int]:
    """Make these scheduled or retryable jobs ready now, whatever their run_at; returns the ids
    moved (a job in another state, or held by a concurrent promotion or cancel, is not)."""
    cursor.execute(_SQL["run_now"], {"job_ids": list(job_ids)})
    return [int(job_id) for (job_id,) in cursor.fetchall()]


def kinds_nobody_runs(cursor: CursorWrapper) -> dict[str, dict[str, int]]:
    """Per queue, per kind: how many jobs wait for a worker that knows their kind."""
    cursor.execute(_SQL["kinds_nobody_runs"])
    found: dict[str, dict[str, int]] = {}
    for queue, kind, jobs in cursor.fetchall():
        found.setdefault(queue, {})[kind] = int(jobs)
    return found
