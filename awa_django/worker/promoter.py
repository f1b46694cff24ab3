"""Moves due scheduled and retryable jobs into the ready ring, on an interval.

Every worker runs this loop for now; ``FOR UPDATE SKIP LOCKED`` in the promotion statement lets
several run at once without moving a job twice. (The maintenance leader takes it over once
leader election exists.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from psycopg_pool import AsyncConnectionPool

from awa_django.storage.backlog import promote_due

logger = logging.getLogger(__name__)


class Promoter:
    """Runs ``promote_due`` every ``interval_s``, repeating at once while batches come back full."""

    def __init__(
        self, pool: AsyncConnectionPool[Any], *, interval_s: float, batch_size: int
    ) -> None:
        self._pool = pool
        self._interval_s = interval_s
        self._batch_size = batch_size

    async def run_once(self) -> int:
        """One promotion pass; returns how many jobs moved."""
        total = 0
        while True:
            async with self._pool.connection() as conn:
                moved = await promote_due(conn, limit=self._batch_size)
            total += moved
            if moved < self._batch_size:
                break
        if total:
            logger.info("promoted due jobs count=%s", total)
        return total

    async def run(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            try:
                await self.run_once()
            except Exception:
                logger.exception("promotion pass failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), timeout=self._interval_s)
