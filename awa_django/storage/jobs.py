"""Read surface across every plane: the current state of jobs, from the ``awa.jobs`` view."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.backends.utils import CursorWrapper

from awa_django.sql import queries

_SQL = queries("jobs")


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRecord:
    """A job as it stands now. ``errors`` holds one entry per failed attempt, oldest first."""

    job_id: int
    state: str
    kind: str
    queue: str
    priority: int
    args: dict[str, Any]
    attempt: int
    run_lease: int
    max_attempts: int
    run_at: datetime | None
    created_at: datetime
    metadata: dict[str, Any]
    tags: list[str]
    errors: list[dict[str, Any]]
    finalized_at: datetime | None


# Django's connection hands jsonb back as text (its JSONField parses it), so these are decoded here.
_JSON_COLUMNS = ("args", "metadata", "errors")


def get_jobs(cursor: CursorWrapper, job_ids: Sequence[int]) -> list[JobRecord]:
    """The current records of ``job_ids`` (unknown ids are left out), ordered by id."""
    cursor.execute(_SQL["get_jobs"], {"job_ids": list(job_ids)})
    names = [col.name for col in cursor.description]
    records = []
    for row in cursor.fetchall():
        values = dict(zip(names, row, strict=True))
        for column in _JSON_COLUMNS:
            if isinstance(values[column], str):
                values[column] = json.loads(values[column])
        records.append(JobRecord(**values))
    return records
