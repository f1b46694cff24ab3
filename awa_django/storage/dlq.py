"""Dead-letter queue storage: entries, retry, purge and moving failed jobs in.

Routing itself happens in ``awa.close_attempts`` (every terminal failure of a queue whose
``queue_meta.dlq_enabled`` is set lands in ``awa.dlq_entries``); this module is the operator
side. Every function runs in the cursor's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.db.backends.utils import CursorWrapper

from awa_django.sql import queries
from awa_django.storage.statement import Statement, all_rows, rows_of, run

_SQL = queries("dlq")
_JSON_COLUMNS: Final = ("args", "metadata", "errors")


@dataclass(frozen=True, slots=True, kw_only=True)
class DlqEntry:
    """A job held in the dead-letter queue. ``errors`` is its whole error history, oldest first
    (each entry has ``attempt``, ``at``, ``type``, ``message`` and ``traceback``);
    ``dlq_reason`` is ``attempts_exhausted``, ``terminal_error`` or the reason given when it was
    moved in by an operator (``moved_from_failed``, ``operator_retry``)."""

    job_id: int
    kind: str
    queue: str
    priority: int
    args: dict[str, Any]
    attempt: int
    # run_lease of the attempt that failed; a retry's next attempt gets a larger one.
    original_run_lease: int
    max_attempts: int
    created_at: datetime
    metadata: dict[str, Any]
    tags: list[str]
    errors: list[dict[str, Any]]
    dlq_reason: str
    dlq_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class DlqFilter:
    """Which entries a list or bulk action covers; None matches everything."""

    queue: str | None = None
    kind: str | None = None
    reason: str | None = None
    # Only entries that entered the DLQ more than this many seconds ago.
    older_than_s: float | None = None
    # The type and message fingerprint of an entry's last error, as a DlqGroup names them.
    error_type: str | None = None
    fingerprint: str | None = None
    # What an operator types: any case, the start of the name or of one of its dotted parts
    # ("lookup" finds "builtins.LookupError").
    kind_prefix: str | None = None
    error_type_prefix: str | None = None

    def params(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "kind": self.kind,
            "reason": self.reason,
            "older_than_s": self.older_than_s,
            "error_type": self.error_type,
            "fingerprint": self.fingerprint,
            "kind_prefix": _folded(self.kind_prefix),
            "error_type_prefix": _folded(self.error_type_prefix),
        }


def _folded(prefix: str | None) -> str | None:
    # The SQL compares lower() of both sides; an empty prefix would match everything.
    return prefix.lower() if prefix else None


@dataclass(frozen=True, slots=True, kw_only=True)
class DlqGroup:
    """Entries whose last error has one type ('(none)' when it had none) and one message
    fingerprint (the message with numbers, ids and hex strings replaced, by
    ``awa.error_fingerprint``); ``sample`` is one of those messages as it was."""

    error_type: str
    fingerprint: str
    count: int
    first_at: datetime
    last_at: datetime
    sample: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class DlqGroups:
    """The groups of the newest ``scanned`` entries a filter matched, largest first."""

    groups: list[DlqGroup]
    scanned: int


def list_entries(
    cursor: CursorWrapper,
    where: DlqFilter,
    *,
    limit: int,
    before: tuple[datetime, int] | None = None,
) -> list[DlqEntry]:
    """Up to ``limit`` entries, newest first, strictly before the ``(dlq_at, job_id)`` keyset."""
    before_at, before_id = before if before is not None else (None, None)
    params = {**where.params(), "limit": limit, "before_at": before_at, "before_id": before_id}
    return run(cursor, _entries("list_dlq", params))


def group_entries(cursor: CursorWrapper, where: DlqFilter, *, scan: int, limit: int) -> DlqGroups:
    """Up to ``limit`` groups of the newest ``scan`` entries matching ``where``'s queue, kind,
    reason and age."""
    cursor.execute(_SQL["dlq_groups"], {**where.params(), "scan": scan, "limit": limit})
    rows = cursor.fetchall()
    return DlqGroups(
        groups=[
            DlqGroup(
                error_type=error_type,
                fingerprint=fingerprint,
                count=count,
                first_at=first_at,
                last_at=last_at,
                sample=sample,
            )
            for error_type, fingerprint, count, first_at, last_at, sample, _ in rows
        ],
        scanned=rows[0][-1] if rows else 0,
    )


def get_entries(cursor: CursorWrapper, job_ids: Sequence[int]) -> list[DlqEntry]:
    return run(cursor, _entries("get_dlq", {"job_ids": list(job_ids)}))


def _entries(block: str, params: dict[str, Any]) -> Statement[list[DlqEntry]]:
    return Statement(
        sql=_SQL[block], params=params, read=all_rows, rows=rows_of(DlqEntry), json=_JSON_COLUMNS
    )


def matching_ids(cursor: CursorWrapper, where: DlqFilter, *, limit: int) -> list[int]:
    """One locked batch of entry ids matching ``where``, oldest first."""
    cursor.execute(_SQL["matching_dlq_ids"], {**where.params(), "limit": limit})
    return [int(job_id) for (job_id,) in cursor.fetchall()]


def count_matching(cursor: CursorWrapper, where: DlqFilter, *, cap: int | None = None) -> int:
    """How many entries ``where`` covers now, counting at most ``cap`` (None: all)."""
    cursor.execute(_SQL["count_matching_dlq"], {**where.params(), "cap": cap})
    return int(cursor.fetchone()[0])


def retry_entries(
    cursor: CursorWrapper,
    job_ids: Sequence[int],
    *,
    run_at: datetime | None,
    queue: str | None,
    priority: int | None,
) -> list[int]:
    """Put entries back as fresh attempts; returns the ids that were in the DLQ."""
    cursor.execute(
        _SQL["retry_dlq"],
        {"job_ids": list(job_ids), "run_at": run_at, "queue": queue, "priority": priority},
    )
    return [int(job_id) for (job_id,) in cursor.fetchall()]


def purge_entries(cursor: CursorWrapper, job_ids: Sequence[int]) -> list[int]:
    """Delete entries for good, hiding from ``awa.jobs`` whatever the ring still holds of
    them; returns the ids that were in the DLQ."""
    cursor.execute(_SQL["purge_dlq"], {"job_ids": list(job_ids)})
    return [int(job_id) for (job_id,) in cursor.fetchall()]


def purged_at(cursor: CursorWrapper, job_id: int) -> datetime | None:
    """When ``job_id`` was purged, while the ring still holds rows of it; None otherwise."""
    cursor.execute(_SQL["purged_at"], {"job_id": job_id})
    row = cursor.fetchone()
    return row[0] if row is not None else None


def ring_held_ids(cursor: CursorWrapper, job_ids: Sequence[int]) -> list[int]:
    """The ``job_ids`` the queue ring still holds rows of, in id order: a purge hides those rows
    but they stay on disk until prune reclaims their slot."""
    cursor.execute(_SQL["ring_held_ids"], {"job_ids": list(job_ids)})
    return [int(job_id) for (job_id,) in cursor.fetchall()]


def depths(cursor: CursorWrapper) -> dict[str, int]:
    """Entries per queue (queues with none are left out)."""
    cursor.execute(_SQL["dlq_depths"])
    return {queue: int(depth) for queue, depth in cursor.fetchall()}


def failed_job_ids(
    cursor: CursorWrapper, where: DlqFilter, *, after_id: int, limit: int
) -> list[int]:
    """One batch of ids of failed jobs (ring or terminal history) above ``after_id``."""
    cursor.execute(_SQL["failed_job_ids"], {**where.params(), "after_id": after_id, "limit": limit})
    return [int(job_id) for (job_id,) in cursor.fetchall()]


def move_jobs(
    cursor: CursorWrapper, job_ids: Sequence[int], *, states: Sequence[str], reason: str
) -> list[int]:
    """Move jobs whose current state is in ``states`` into the DLQ; returns the ids moved."""
    cursor.execute(
        _SQL["move_to_dlq"], {"job_ids": list(job_ids), "states": list(states), "reason": reason}
    )
    return [int(job_id) for (job_id,) in cursor.fetchall()]
