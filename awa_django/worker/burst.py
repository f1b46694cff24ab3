"""Burst mode's service: stop the process once every queue is idle and nothing deferred is due
within the burst wait."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from psycopg_pool import AsyncConnectionPool

from awa_django.maintenance.promoter import Promoter
from awa_django.storage.backlog import seconds_until_next_due
from awa_django.worker.completer import Completer
from awa_django.worker.dispatchers import Dispatchers

logger = logging.getLogger(__name__)


class BurstWatcher:
    name = "burst"

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        dispatchers: Dispatchers,
        *,
        promoter: Promoter,
        completer: Completer,
        wait_s: float,
        finished: Callable[[], None],
    ) -> None:
        self._pool = pool
        self._dispatchers = dispatchers
        self._promoter = promoter
        self._completer = completer
        self._wait_s = wait_s
        self._finished = finished  # asks the process to stop
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name="awa-burst")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _watch(self) -> None:
        dispatchers = self._dispatchers
        queues = list(dispatchers.by_queue)
        while True:
            await asyncio.sleep(0.05)
            if not dispatchers.idle:
                continue
            # Every check below awaits, and a dispatcher may claim (say, a job the leader just
            # promoted) meanwhile: any claim since this point means start over.
            claimed_before = dispatchers.claimed
            await self._completer.drain()
            if (await self._promoter.run_once()).moved:
                dispatchers.poke()
                continue
            async with self._pool.connection() as conn:
                due_in = await seconds_until_next_due(conn, queues=queues)
            if due_in is not None and due_in <= self._wait_s:
                await asyncio.sleep(max(due_in, 0.0) + 0.01)
                continue
            # Work may have become ready since the dispatchers last looked (the leader's own
            # promotion pass, a NOTIFY in flight): one more claim round must come back empty.
            if await self._claimed_in_confirmation_round(since=claimed_before):
                continue
            logger.info("burst finished: nothing runnable or due soon")
            self._finished()
            return

    async def _claimed_in_confirmation_round(self, *, since: int) -> bool:
        rounds = {d: d.claim_rounds for d in self._dispatchers}
        self._dispatchers.poke()
        # Only a claim that started after the poke can have seen the newest commits.
        while not all(d.idle and d.claim_rounds > rounds[d] for d in self._dispatchers):
            await asyncio.sleep(0.01)
        return self._dispatchers.claimed != since
