"""Fleet-wide rate limits: claims paced by one token bucket per queue kept in PostgreSQL, and
the leader's cleanup of the bucket's ledger."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row

from awa_django.sql import queries
from awa_django.storage.queue import ClaimedJob

_SQL = queries("rate_limits")


@dataclass(frozen=True, slots=True)
class LimitedClaim:
    """What a fleet-limited claim got, and how long until the budget allows the next job
    (None when the claim was not held back by the budget)."""

    jobs: list[ClaimedJob]
    throttled_for_s: float | None


async def claim_ready_limited(
    conn: AsyncConnection[Any],
    *,
    queue: str,
    limit: int,
    claimed_by: str,
    deadline_s: float,
    aging_s: float,
    sequential: bool,
    rate: float,
    burst: int,
) -> LimitedClaim:
    """Claim up to ``limit`` jobs of ``queue`` within its fleet-wide token bucket, in one round
    trip (autocommit connection)."""
    async with conn.cursor(row_factory=dict_row) as cursor:
        await cursor.execute(
            _SQL["claim_ready_limited"],
            {
                "queue": queue,
                "limit": limit,
                "claimed_by": claimed_by,
                "deadline_s": deadline_s,
                "aging_s": aging_s,
                "sequential": sequential,
                "rate": rate,
                "burst": burst,
            },
        )
        rows = await cursor.fetchall()
    jobs: list[ClaimedJob] = []
    throttled_for_s: float | None = None
    for row in rows:
        wait_s = row.pop("throttled_for_s")
        if row["job_id"] is None:
            throttled_for_s = float(wait_s)
        else:
            jobs.append(ClaimedJob(**row))
    return LimitedClaim(jobs, throttled_for_s)


async def delete_superseded_rate_entries(conn: AsyncConnection[Any], *, limit: int) -> int:
    """Delete one bounded batch of ledger rows nobody reads any more; returns how many went."""
    cursor = await conn.execute(_SQL["delete_superseded_rate_entries"], {"limit": limit})
    return cursor.rowcount
