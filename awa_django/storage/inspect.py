"""Listing jobs for operators, from the ``awa.jobs`` view (reads every retained fact, so keep
it off hot paths)."""

from __future__ import annotations

from django.db.backends.utils import CursorWrapper

from awa_django.sql import queries
from awa_django.storage.jobs import JSON_COLUMNS, JobRecord, fetch_dicts

_SQL = queries("inspect")


def list_jobs(
    cursor: CursorWrapper,
    *,
    queue: str | None,
    kind: str | None,
    state: str | None,
    limit: int,
    before_id: int | None = None,
) -> list[JobRecord]:
    """Up to ``limit`` jobs, newest id first, with ids below ``before_id``."""
    cursor.execute(
        _SQL["list_jobs"],
        {"queue": queue, "kind": kind, "state": state, "limit": limit, "before_id": before_id},
    )
    return [JobRecord(**values) for values in fetch_dicts(cursor, JSON_COLUMNS)]
