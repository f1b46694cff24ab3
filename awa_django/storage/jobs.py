"""Reading jobs back across every plane: their current state from the ``awa.jobs`` view, by
id, and their claims. Listings find their ids in ``storage/browse.py`` and read the records
here; ``awa_django.ops.records`` is the public API over both."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from awa_django.job_record import JobRecord as JobRecord
from awa_django.sql import queries
from awa_django.storage.statement import Statement, all_rows, rows_of

# JobRecord is in the base layer (awa_django.job_record), beside the exceptions that carry one
# (JobFailed, WaitTimeout); its importers may still name it from here.
_SQL = queries("jobs")


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """One claim of a job: which worker started an attempt, and when."""

    claimed_by: str
    claimed_at: datetime


# Django's connection hands jsonb back as text (its JSONField parses it), so these are decoded here.
JSON_COLUMNS = ("args", "metadata", "errors", "result")


def jobs_by_id(job_ids: Sequence[int]) -> Statement[list[JobRecord]]:
    """The current records of ``job_ids`` (unknown ids are left out), ordered by id."""
    return Statement(
        sql=_SQL["get_jobs"],
        params={"job_ids": list(job_ids)},
        read=all_rows,
        rows=rows_of(JobRecord),
        json=JSON_COLUMNS,
    )


def _claims(rows: list[Any]) -> dict[int, list[Claim]]:
    claims: dict[int, list[Claim]] = {}
    for job_id, claimed_by, claimed_at in rows:
        claims.setdefault(job_id, []).append(Claim(claimed_by=claimed_by, claimed_at=claimed_at))
    return claims


def get_claims(job_ids: Sequence[int]) -> Statement[dict[int, list[Claim]]]:
    """The claims of ``job_ids``, oldest first, by job id (jobs never claimed are left out)."""
    return Statement(sql=_SQL["get_claims"], params={"job_ids": list(job_ids)}, read=_claims)
