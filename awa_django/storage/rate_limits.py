"""Fleet-wide rate limits: claims paced by one token bucket per queue kept in PostgreSQL, and
the leader's cleanup of the bucket's ledger."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Generic

from awa_django.sql import queries
from awa_django.storage.queue import CLAIMED_JOB_JSON, ClaimRequest
from awa_django.storage.statement import J, RowsOf, Statement

_SQL = queries("rate_limits")

# What the caller's row maker makes of a claimed row (core's ClaimedJob).


@dataclass(frozen=True, slots=True)
class LimitedClaim(Generic[J]):
    """What a fleet-limited claim got, and how long until the budget allows the next job
    (None when the claim was not held back by the budget)."""

    jobs: list[J]
    throttled_for_s: float | None


@dataclass(frozen=True, slots=True)
class FleetBudget:
    """A queue's fleet-wide token bucket: ``rate`` jobs a second, at most ``burst`` at once."""

    rate: float
    burst: int


# A row of the limited claim: its job (None on the row that only says the claim was held back)
# and its throttled_for_s.
_LimitedRow = tuple[J | None, Any]


def _limited_claim(rows: list[_LimitedRow[J]]) -> LimitedClaim[J]:
    jobs: list[J] = []
    throttled_for_s: float | None = None
    for job, wait_s in rows:
        if job is None:
            throttled_for_s = float(wait_s)
        else:
            jobs.append(job)
    return LimitedClaim(jobs, throttled_for_s)


# Cached: one row maker per job row maker, so the statement's psycopg row factory (cached by its
# row maker) is built once and not per claim.
@cache
def _limited_rows(job_rows: RowsOf[J]) -> RowsOf[_LimitedRow[J]]:
    def rows(names: tuple[str, ...]) -> Callable[[Sequence[Any]], _LimitedRow[J]]:
        # throttled_for_s is the last column, after the claimed job's.
        make = job_rows(names[:-1])
        job_id = names.index("job_id")
        return lambda values: (
            None if values[job_id] is None else make(values[:-1]),
            values[-1],
        )

    return rows


def claim_ready_limited(
    request: ClaimRequest,
    budget: FleetBudget,
    *,
    rows: RowsOf[J],
    limit: int,
    aged: bool = True,
) -> Statement[LimitedClaim[J]]:
    """Claim up to ``limit`` jobs of the request's queue within its fleet-wide token bucket, in
    one statement; ``rows`` makes each job from its row (``core.claimed_job.claimed_job_rows``)."""
    return Statement(
        sql=_SQL["claim_ready_limited"],
        params={
            **request.params(limit=limit, aged=aged),
            "rate": budget.rate,
            "burst": budget.burst,
        },
        read=_limited_claim,
        rows=_limited_rows(rows),
        json=CLAIMED_JOB_JSON,
    )


def delete_superseded_rate_entries(*, limit: int) -> Statement[int]:
    """Delete one bounded batch of ledger rows nobody reads any more; answers how many went."""
    params = {"limit": limit}
    return Statement(sql=_SQL["delete_superseded_rate_entries"], params=params, read=len)
