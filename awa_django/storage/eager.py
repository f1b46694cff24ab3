"""The statements only in-process runs (eager mode and ``awa_django.testing``) need, run on the
caller's Django connection: publishing what its open transaction enqueued, the job a claim would
take next, and the test clock's moves of deferred jobs.

Claims, promotions and closures are the worker's own statements (``storage.statement.run``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from awa_django.sql import queries
from awa_django.storage.statement import Statement, first_int, nothing

_SQL = queries("eager")


@dataclass(frozen=True, slots=True)
class NextReady:
    """The job a claim of a queue would take next."""

    job_id: int
    kind: str


# Publish the ready rows the running transaction wrote, as its commit would, so that a claim
# inside the same (test) transaction sees them. The caller runs it only inside a transaction:
# outside one, every write has committed already.
PUBLISH_PENDING: Statement[None] = Statement(sql=_SQL["publish_pending"], read=nothing)


def _next_ready(rows: list[Any]) -> NextReady | None:
    return NextReady(int(rows[0][0]), str(rows[0][1])) if rows else None


def next_ready(*, queue: str) -> Statement[NextReady | None]:
    """The job the next claim of ``queue`` would take, or None when nothing is ready (of what
    is published: the caller runs ``PUBLISH_PENDING`` first)."""
    return Statement(sql=_SQL["next_ready"], params={"queue": queue}, read=_next_ready)


def shift_deferred(*, seconds: float) -> Statement[int]:
    """Move every deferred job's run_at ``seconds`` earlier; answers how many moved."""
    return Statement(sql=_SQL["shift_deferred"], params={"seconds": seconds}, read=first_int)


def make_due(*, job_ids: Sequence[int] | None) -> Statement[int]:
    """Make ``job_ids`` (every deferred job when None) due now; answers how many moved."""
    params = {"job_ids": None if job_ids is None else list(job_ids)}
    return Statement(sql=_SQL["make_due"], params=params, read=first_int)
