"""Reading jobs back: the current state of a job, from any process."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connections

from awa_django.conf import get_settings
from awa_django.limits import is_job_id
from awa_django.storage.jobs import JobRecord
from awa_django.storage.jobs import get_jobs as _fetch_jobs
from awa_django.storage.jobs import list_jobs as _list_jobs


def get_jobs(job_ids: Sequence[int]) -> list[JobRecord]:
    """Records of ``job_ids`` that exist, ordered by id. States: available, scheduled, running,
    retryable, completed, failed, cancelled, dlq. History is kept until its ring slot is pruned."""
    ids = [job_id for job_id in job_ids if is_job_id(job_id)]
    if not ids:
        return []
    with connections[get_settings().DATABASE_ALIAS].cursor() as cursor:
        return _fetch_jobs(cursor, ids)


def get_job(job_id: int) -> JobRecord | None:
    """The record of one job, or None if it never committed (or was pruned)."""
    found = get_jobs([job_id])
    return found[0] if found else None


def list_jobs(
    *,
    queue: str | None = None,
    kind: str | None = None,
    state: str | None = None,
    limit: int = 50,
    before_id: int | None = None,
) -> list[JobRecord]:
    """Jobs newest first, filtered by queue, kind and state; page on with ``before_id`` (the
    last id of the previous page). Reads the ``awa.jobs`` view: fine for operators, not for hot
    paths."""
    with connections[get_settings().DATABASE_ALIAS].cursor() as cursor:
        return _list_jobs(
            cursor, queue=queue, kind=kind, state=state, limit=limit, before_id=before_id
        )
