"""Reading jobs back: the current state of a job, from any process."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connections

from awa_django.conf import get_settings
from awa_django.job_record import JobRecord
from awa_django.limits import is_job_id
from awa_django.storage.browse import JobFilter
from awa_django.storage.browse import list_jobs as browse_jobs
from awa_django.storage.jobs import jobs_by_id
from awa_django.storage.statement import run, run_read


def get_jobs(job_ids: Sequence[int], *, database: str | None = None) -> list[JobRecord]:
    """Records of ``job_ids`` that exist, ordered by id. States: available, scheduled, running,
    retryable, completed, failed, cancelled, dlq. History is kept until its ring slot is pruned.

    Job ids count per database: with queues in several databases (a queue's ``database``),
    ``database`` names the alias to read; None reads every database holding queues, and an id
    found in more than one raises ``ValueError`` asking for ``database``."""
    ids = [job_id for job_id in job_ids if is_job_id(job_id)]
    if not ids:
        return []
    aliases = get_settings().operator_databases(database)
    found: dict[int, tuple[str, JobRecord]] = {}
    for alias in aliases:
        with connections[alias].cursor() as cursor:
            records = run(cursor, jobs_by_id(ids))
        for record in records:
            if record.job_id in found:
                raise ValueError(
                    f"job {record.job_id} exists in databases {found[record.job_id][0]!r} and "
                    f"{alias!r}; pass database= to say which"
                )
            found[record.job_id] = (alias, record)
    return [found[job_id][1] for job_id in sorted(found)]


def get_job(job_id: int, *, database: str | None = None) -> JobRecord | None:
    """The record of one job, or None if it never committed (or was pruned); ``database`` as
    for ``get_jobs``."""
    found = get_jobs([job_id], database=database)
    return found[0] if found else None


def list_jobs(
    *,
    queue: str | None = None,
    kind: str | None = None,
    state: str | None = None,
    limit: int = 50,
    before_id: int | None = None,
    database: str | None = None,
) -> list[JobRecord]:
    """Jobs newest first, filtered by queue, kind (whole names, case included) and state; page
    on with ``before_id`` (the last id of the previous page). Read as the admin's Jobs list
    reads them, down the job id and name indexes: a page costs about the same at any history
    size. An unknown ``state`` or a negative ``limit`` raises ``ValueError``. ``database``: the
    alias to read (default: ``queue``'s database, else ``AWA["DATABASE_ALIAS"]``)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit must be an integer 0 or more, got {limit!r}")
    if before_id is not None and (isinstance(before_id, bool) or not isinstance(before_id, int)):
        raise ValueError(f"before_id must be a job id or None, got {before_id!r}")
    alias = get_settings().operator_database(database, queue=queue)
    where = JobFilter(queue=queue, kind=kind, state=state, exact=True)
    if limit == 0:
        return []
    with connections[alias].cursor() as cursor:
        page = run_read(cursor, browse_jobs(where=where, before=before_id, limit=limit))
    return page.jobs
