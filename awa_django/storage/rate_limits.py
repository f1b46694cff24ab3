"""Fleet-wide rate limits: claims paced by one token bucket per queue kept in PostgreSQL, and
the leader's cleanup of the bucket's ledger."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from awa_django.sql import queries
from awa_django.storage.queue import CLAIMED_JOB_JSON, ClaimedJob, ClaimRequest
from awa_django.storage.statement import Statement

_SQL = queries("rate_limits")


@dataclass(frozen=True, slots=True)
class LimitedClaim:
    """What a fleet-limited claim got, and how long until the budget allows the next job
    (None when the claim was not held back by the budget)."""

    jobs: list[ClaimedJob]
    throttled_for_s: float | None


@dataclass(frozen=True, slots=True)
class FleetBudget:
    """A queue's fleet-wide token bucket: ``rate`` jobs a second, at most ``burst`` at once."""

    rate: float
    burst: int


def _limited_claim(rows: list[dict[str, Any]]) -> LimitedClaim:
    jobs: list[ClaimedJob] = []
    throttled_for_s: float | None = None
    for row in rows:
        wait_s = row.pop("throttled_for_s")
        if row["job_id"] is None:
            throttled_for_s = float(wait_s)
        else:
            jobs.append(ClaimedJob(**row))
    return LimitedClaim(jobs, throttled_for_s)


def _dict_rows(names: tuple[str, ...]) -> Callable[[Sequence[Any]], dict[str, Any]]:
    return lambda values: dict(zip(names, values, strict=True))


def claim_ready_limited(
    request: ClaimRequest, budget: FleetBudget, *, limit: int, aged: bool = True
) -> Statement[LimitedClaim]:
    """Claim up to ``limit`` jobs of the request's queue within its fleet-wide token bucket, in
    one statement."""
    return Statement(
        sql=_SQL["claim_ready_limited"],
        params={
            **request.params(limit=limit, aged=aged),
            "rate": budget.rate,
            "burst": budget.burst,
        },
        read=_limited_claim,
        rows=_dict_rows,
        json=CLAIMED_JOB_JSON,
    )


async def delete_superseded_rate_entries(conn: AsyncConnection[Any], *, limit: int) -> int:
    """Delete one bounded batch of ledger rows nobody reads any more; returns how many went."""
    cursor = await conn.execute(_SQL["delete_superseded_rate_entries"], {"limit": limit})
    return cursor.rowcount
