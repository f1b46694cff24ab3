"""Read-only listings for operator surfaces: keyset pages of jobs and the history of one job.

Pages walk job ids downwards from a cursor (newest first) and never count: at a million jobs a
page costs what it costs at a thousand. A job's current state comes from the ``awa.jobs`` view,
looked up by id for the ids of one window, which is the only way that view is fast.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.db.backends.utils import CursorWrapper

from awa_django.sql import queries
from awa_django.storage.jobs import JobRecord, get_jobs

_SQL = queries("browse")

# Every state the awa.jobs view reports, in the order of a job's life.
JOB_STATES: Final = (
    "available",
    "scheduled",
    "running",
    "retryable",
    "completed",
    "failed",
    "cancelled",
    "dlq",
)
# Which of the four body tables can hold a job whose current state is the key.
_ARMS_BY_STATE: Final[dict[str | None, frozenset[str]]] = {
    None: frozenset({"ready", "deferred", "history", "dlq"}),
    "available": frozenset({"ready"}),
    "running": frozenset({"ready"}),
    "completed": frozenset({"ready"}),
    "scheduled": frozenset({"deferred"}),
    "retryable": frozenset({"deferred"}),
    "failed": frozenset({"ready", "history"}),
    "cancelled": frozenset({"ready", "history"}),
    "dlq": frozenset({"dlq"}),
}
# With a state filter only some ids of a window match, so the window is wider than the page.
STATE_WINDOW_FACTOR: Final = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class JobFilter:
    """What a jobs page is narrowed to; None means any."""

    kind: str | None = None
    queue: str | None = None
    state: str | None = None

    def __post_init__(self) -> None:
        if self.state not in _ARMS_BY_STATE:
            raise ValueError(f"state must be one of {', '.join(JOB_STATES)}, got {self.state!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class JobPage:
    """One page of jobs, newest first. ``next_before`` is the cursor of the next (older) page,
    None on the last one. A state-filtered page may hold fewer rows than asked while older
    pages still have matches: it covers a fixed window of ids rather than counting matches."""

    jobs: list[JobRecord]
    next_before: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """One started attempt of a job; outcome, finalized_at and error stay None while open."""

    attempt: int
    run_lease: int
    claimed_by: str
    claimed_at: datetime
    deadline_at: datetime | None
    outcome: str | None
    finalized_at: datetime | None
    error: dict[str, Any] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SavedProgress:
    progress: dict[str, Any] | None
    checkpoint: dict[str, Any] | None
    updated_at: datetime


def _json(value: Any) -> Any:
    # Django's connection hands jsonb back as text.
    return json.loads(value) if isinstance(value, str) else value


def list_jobs(
    cursor: CursorWrapper, *, where: JobFilter, before: int | None, limit: int
) -> JobPage:
    """A page of at most ``limit`` jobs with ids below ``before`` (None: from the newest)."""
    arms = _ARMS_BY_STATE[where.state]
    size = limit if where.state is None else limit * STATE_WINDOW_FACTOR
    cursor.execute(
        _SQL["job_id_window"],
        {
            "before": before if before is not None else 2**63 - 1,
            "size": size,
            "kind": where.kind,
            "queue": where.queue,
            "state": where.state,
            "from_ready": "ready" in arms,
            "from_deferred": "deferred" in arms,
            "from_history": "history" in arms,
            "from_dlq": "dlq" in arms,
        },
    )
    window = [row[0] for row in cursor.fetchall()]
    records = get_jobs(cursor, window) if window else []
    matches = sorted(
        (record for record in records if where.state is None or record.state == where.state),
        key=lambda record: record.job_id,
        reverse=True,
    )
    if len(matches) > limit:
        return JobPage(jobs=matches[:limit], next_before=matches[limit - 1].job_id)
    return JobPage(jobs=matches, next_before=window[-1] if len(window) == size else None)


def job_attempts(cursor: CursorWrapper, job_id: int) -> list[Attempt]:
    """The attempts of ``job_id`` still in the ring, oldest first."""
    cursor.execute(_SQL["job_attempts"], {"job_id": job_id})
    names = [col.name for col in cursor.description]
    attempts = []
    for row in cursor.fetchall():
        values = dict(zip(names, row, strict=True))
        values["error"] = _json(values["error"])
        attempts.append(Attempt(**values))
    return attempts


def job_progress(cursor: CursorWrapper, job_id: int) -> SavedProgress | None:
    """The progress and checkpoint ``job_id`` saved, or None if it saved none."""
    cursor.execute(_SQL["job_progress"], {"job_id": job_id})
    row = cursor.fetchone()
    if row is None:
        return None
    progress, checkpoint, updated_at = row
    return SavedProgress(
        progress=_json(progress), checkpoint=_json(checkpoint), updated_at=updated_at
    )
