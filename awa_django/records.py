"""Reading jobs back: the current state of a job, from any process."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connections

from awa_django.conf import get_settings
from awa_django.storage.jobs import JobRecord
from awa_django.storage.jobs import get_jobs as _fetch_jobs


def get_jobs(job_ids: Sequence[int]) -> list[JobRecord]:
    """Records of ``job_ids`` that exist, ordered by id. States: available, scheduled, running,
    retryable, completed, failed, cancelled, dlq. History is kept until its ring slot is pruned."""
    with connections[get_settings().DATABASE_ALIAS].cursor() as cursor:
        return _fetch_jobs(cursor, job_ids)


def get_job(job_id: int) -> JobRecord | None:
    """The record of one job, or None if it never committed (or was pruned)."""
    found = get_jobs([job_id])
    return found[0] if found else None
