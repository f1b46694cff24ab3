"""The worker's claim, promote and close statements on a Django cursor, for in-process runs
(``awa_django.testing`` and eager mode), and the reads and clock moves the test helpers need.

Same SQL and parameters as the worker's async functions; only the connection differs: it is the
caller's Django connection, so jobs enqueued in an open (test) transaction are visible, and the
claims and closures join that transaction (or autocommit, as the worker's do, outside one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from django.db.backends.utils import CursorWrapper

from awa_django.sql import queries
from awa_django.storage.backlog import PROMOTE_BLOCKS
from awa_django.storage.execution import Closed, Completion, close_params, closed_from_rows
from awa_django.storage.jobs import fetch_dicts
from awa_django.storage.queue import ClaimedJob, claim_params

_SQL = queries("inline")
_QUEUE_SQL = queries("queue")
_BACKLOG_SQL = queries("backlog")
_EXECUTION_SQL = queries("execution")
_RUNTIME_SQL = queries("runtime")

# Django's connection hands jsonb back as text.
_CLAIMED_JSON: Final = ("args", "metadata", "errors", "progress", "checkpoint")


@dataclass(frozen=True, slots=True)
class NextReady:
    """The job a claim of a queue would take next."""

    job_id: int
    kind: str


def publish_pending(cursor: CursorWrapper) -> None:
    """Publish the ready rows the cursor's open transaction wrote, as its commit would, so that
    a claim inside the same (test) transaction sees them. Outside a transaction every write
    has committed already."""
    if cursor.db.in_atomic_block:
        cursor.execute(_SQL["publish_pending"])


def claim_ready(
    cursor: CursorWrapper,
    *,
    queue: str,
    limit: int,
    claimed_by: str,
    deadline_s: float,
    aging_s: float,
    sequential: bool,
) -> list[ClaimedJob]:
    """``storage.queue.claim_ready`` on a Django cursor, after publishing what the cursor's
    transaction wrote."""
    publish_pending(cursor)
    cursor.execute(
        _QUEUE_SQL["claim_ready"],
        claim_params(
            queue=queue,
            limit=limit,
            claimed_by=claimed_by,
            deadline_s=deadline_s,
            aging_s=aging_s,
            sequential=sequential,
        ),
    )
    return [ClaimedJob(**values) for values in fetch_dicts(cursor, _CLAIMED_JSON)]


def close_attempts(cursor: CursorWrapper, completions: Sequence[Completion]) -> Closed:
    """``storage.execution.close_attempts`` on a Django cursor."""
    cursor.execute(_EXECUTION_SQL["close_attempts"], close_params(completions))
    return closed_from_rows(cursor.fetchall())


def notify_cancel(cursor: CursorWrapper, attempts: Sequence[tuple[int, int]]) -> None:
    """``storage.execution.notify_cancel`` on a Django cursor: delivered when it commits."""
    if attempts:
        cursor.execute(
            _EXECUTION_SQL["notify_cancel"],
            {"attempts": [f"{job}:{lease}" for job, lease in attempts]},
        )


def promote_due(cursor: CursorWrapper, *, limit: int) -> int:
    """``storage.backlog.promote_due`` on a Django cursor."""
    moved = 0
    for block in PROMOTE_BLOCKS:
        cursor.execute(_BACKLOG_SQL[block], {"limit": limit})
        row = cursor.fetchone()
        moved += int(row[0]) if row else 0
    return moved


def publish_queue_policies(cursor: CursorWrapper, dlq_enabled: Mapping[str, bool]) -> None:
    """Publish each queue's DLQ policy where the close statement reads it, as workers do."""
    cursor.execute(
        _RUNTIME_SQL["sync_queue_policies"],
        {"queues": list(dlq_enabled), "dlq_enabled": list(dlq_enabled.values())},
    )


def next_ready(cursor: CursorWrapper, *, queue: str) -> NextReady | None:
    """The job the next claim of ``queue`` would take, or None when nothing is ready."""
    publish_pending(cursor)
    cursor.execute(_SQL["next_ready"], {"queue": queue})
    row = cursor.fetchone()
    return None if row is None else NextReady(int(row[0]), str(row[1]))


def shift_deferred(cursor: CursorWrapper, *, seconds: float) -> int:
    """Move every deferred job's run_at ``seconds`` earlier; returns how many moved."""
    cursor.execute(_SQL["shift_deferred"], {"seconds": seconds})
    return int(cursor.fetchone()[0])


def make_due(cursor: CursorWrapper, *, job_ids: Sequence[int] | None) -> int:
    """Make ``job_ids`` (every deferred job when None) due now; returns how many moved."""
    cursor.execute(_SQL["make_due"], {"job_ids": None if job_ids is None else list(job_ids)})
    return int(cursor.fetchone()[0])
