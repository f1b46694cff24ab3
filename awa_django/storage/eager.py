"""The statements only in-process runs (eager mode and ``awa_django.testing``) need, on the
caller's Django connection: publishing what its open transaction enqueued, the job a claim would
take next, and the test clock's moves of deferred jobs.

Claims, promotions and closures are the worker's own statements (``storage.statement.run``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db.backends.utils import CursorWrapper

from awa_django.sql import queries

_SQL = queries("eager")


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
