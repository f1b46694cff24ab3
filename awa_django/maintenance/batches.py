"""The loop the cleanup and promotion tasks share: run bounded batches until one says it was
the last, each on a connection of its own, so no pass builds one huge transaction or holds a
pooled connection while the others wait."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool


async def in_batches(
    pool: AsyncConnectionPool[Any],
    batch: Callable[[AsyncConnection[Any]], Awaitable[tuple[int, bool]]],
    *,
    max_batches: int | None = None,
) -> int:
    """Run ``batch`` (returning what it did and whether more may be left) until it reports
    nothing left or ``max_batches`` ran; the total it did."""
    total = ran = 0
    more = True
    while more and (max_batches is None or ran < max_batches):
        async with pool.connection() as conn:
            done, more = await batch(conn)
        total += done
        ran += 1
    return total


async def until_short(
    pool: AsyncConnectionPool[Any],
    batch: Callable[[AsyncConnection[Any], int], Awaitable[int]],
    *,
    batch_size: int,
) -> int:
    """Run ``batch(conn, limit)`` until one comes back short of ``batch_size``: a short batch
    means the backlog is done, a full one that rows may be left."""

    async def step(conn: AsyncConnection[Any]) -> tuple[int, bool]:
        done = await batch(conn, batch_size)
        return done, done >= batch_size

    return await in_batches(pool, step)
