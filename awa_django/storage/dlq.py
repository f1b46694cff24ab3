"""Dead-letter queue storage: entries, retry, purge and moving failed jobs in.

Routing itself happens in ``awa.close_attempts`` (every terminal failure of a queue whose
``queue_meta.dlq_enabled`` is set lands in ``awa.dlq_entries``); this module is the operator
side. Every function builds a statement, or a read of two where a filter's prefix is first turned
into the names it matches; callers run it in their transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, Final, TypeVar

from awa_django.sql import queries
from awa_django.storage.statement import (
    Read,
    Statement,
    Steps,
    all_rows,
    first_int,
    first_value,
    ids,
    rows_of,
    step,
)

_SQL = queries("dlq")
_JSON_COLUMNS: Final = ("args", "metadata", "errors")
T = TypeVar("T")


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
    where: DlqFilter, *, limit: int, before: tuple[datetime, int] | None = None
) -> Read[list[DlqEntry]]:
    """Up to ``limit`` entries, newest first, strictly before the ``(dlq_at, job_id)`` keyset."""
    before_at, before_id = before if before is not None else (None, None)
    page = {"limit": limit, "before_at": before_at, "before_id": before_id}
    return _filtered(where, lambda params: _entries("list_dlq", {**params, **page}))


def group_entries(where: DlqFilter, *, scan: int, limit: int) -> Read[DlqGroups]:
    """Up to ``limit`` groups of the newest ``scan`` entries matching ``where``."""
    return _filtered(
        where,
        lambda params: Statement(
            sql=_SQL["dlq_groups"], params={**params, "scan": scan, "limit": limit}, read=_groups
        ),
    )


def _filtered(where: DlqFilter, statement: Callable[[dict[str, Any]], Statement[T]]) -> Read[T]:
    """``statement`` given the filter's parameters, a prefix first turned into the names it
    matches (the query dlq_names)."""
    return Read(steps=partial(_filtered_steps, where, statement))


def _filtered_steps(
    where: DlqFilter, statement: Callable[[dict[str, Any]], Statement[T]]
) -> Steps[T]:
    params = where.params()
    names: dict[str, list[str] | None] = {"kinds": None, "error_types": None}
    if where.kind_prefix or where.error_type_prefix:
        names = yield from step(Statement(sql=_SQL["dlq_names"], params=params, read=_names))
    return (yield from step(statement({**params, **names})))


def _names(rows: list[Any]) -> dict[str, list[str] | None]:
    kinds, error_types = rows[0]
    return {"kinds": kinds, "error_types": error_types}


def _groups(rows: list[Any]) -> DlqGroups:
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


def get_entries(job_ids: Sequence[int]) -> Statement[list[DlqEntry]]:
    return _entries("get_dlq", {"job_ids": list(job_ids)})


def _entries(block: str, params: dict[str, Any]) -> Statement[list[DlqEntry]]:
    return Statement(
        sql=_SQL[block], params=params, read=all_rows, rows=rows_of(DlqEntry), json=_JSON_COLUMNS
    )


def matching_ids(where: DlqFilter, *, limit: int) -> Read[list[int]]:
    """One locked batch of entry ids matching ``where``, oldest first."""
    return _filtered(
        where,
        lambda params: Statement(
            sql=_SQL["matching_dlq_ids"], params={**params, "limit": limit}, read=ids
        ),
    )


def count_matching(where: DlqFilter, *, cap: int | None = None) -> Read[int]:
    """How many entries ``where`` covers now, counting at most ``cap`` (None: all)."""
    return _filtered(
        where,
        lambda params: Statement(
            sql=_SQL["count_matching_dlq"], params={**params, "cap": cap}, read=first_int
        ),
    )


def retry_entries(
    job_ids: Sequence[int], *, run_at: datetime | None, queue: str | None, priority: int | None
) -> Statement[list[int]]:
    """Put entries back as fresh attempts; answers the ids that were in the DLQ."""
    return Statement(
        sql=_SQL["retry_dlq"],
        params={"job_ids": list(job_ids), "run_at": run_at, "queue": queue, "priority": priority},
        read=ids,
    )


def purge_entries(job_ids: Sequence[int]) -> Statement[list[int]]:
    """Delete entries for good, hiding from ``awa.jobs`` whatever the ring still holds of
    them; answers the ids that were in the DLQ."""
    return Statement(sql=_SQL["purge_dlq"], params={"job_ids": list(job_ids)}, read=ids)


def purged_at(job_id: int) -> Statement[datetime | None]:
    """When ``job_id`` was purged, while the ring still holds rows of it; None otherwise."""
    return Statement(sql=_SQL["purged_at"], params={"job_id": job_id}, read=first_value)


def ring_held_ids(job_ids: Sequence[int]) -> Statement[list[int]]:
    """The ``job_ids`` the queue ring still holds rows of, in id order: a purge hides those rows
    but they stay on disk until prune reclaims their slot."""
    return Statement(sql=_SQL["ring_held_ids"], params={"job_ids": list(job_ids)}, read=ids)


def depths() -> Statement[dict[str, int]]:
    """Entries per queue (queues with none are left out)."""
    return Statement(sql=_SQL["dlq_depths"], read=_depths)


def _depths(rows: list[Any]) -> dict[str, int]:
    return {queue: int(depth) for queue, depth in rows}


def failed_job_ids(where: DlqFilter, *, after_id: int, limit: int) -> Statement[list[int]]:
    """One batch of ids of failed jobs (ring or terminal history) above ``after_id``."""
    return Statement(
        sql=_SQL["failed_job_ids"],
        params={**where.params(), "after_id": after_id, "limit": limit},
        read=ids,
    )


def move_jobs(
    job_ids: Sequence[int], *, states: Sequence[str], reason: str
) -> Statement[list[int]]:
    """Move jobs whose current state is in ``states`` into the DLQ; answers the ids moved."""
    return Statement(
        sql=_SQL["move_to_dlq"],
        params={"job_ids": list(job_ids), "states": list(states), "reason": reason},
        read=ids,
    )
