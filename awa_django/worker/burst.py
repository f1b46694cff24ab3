"""Burst mode's service: stop the process once every queue is idle and nothing deferred is due
within the burst wait."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from psycopg_pool import AsyncConnectionPool

from awa_django.maintenance.promoter import Promoter
from awa_django.storage.backlog import seconds_until_next_due
from awa_django.storage.statement import run_async
from awa_django.worker.completer import Completer
from awa_django.worker.dispatchers import Dispatchers

logger = logging.getLogger(__name__)


@dataclass(eq=False, kw_only=True)
class BurstWatcher:
    pool: AsyncConnectionPool[Any]
    dispatchers: Dispatchers
    promoter: Promoter
    completer: Completer
    wait_s: float
    finished: Callable[[], None]  # asks the process to stop
    name: str = "burst"
    _task: asyncio.Task[None] | None = field(default=None, init=False)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name="awa-burst")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _watch(self) -> None:
        dispatchers = self.dispatchers
        queues = list(dispatchers.by_queue)
        while True:
            await asyncio.sleep(0.05)
            if not dispatchers.idle:
                continue
            # Every check below awaits, and a dispatcher may claim (say, a job the leader just
            # promoted) meanwhile: any claim since this point means start over.
            claimed_before = dispatchers.claimed
            await self.completer.drain()
            if (await self.promoter.run_once()).moved:
                dispatchers.poke()
                continue
            async with self.pool.connection() as conn:
                due_in = await run_async(conn, seconds_until_next_due(queues=queues))
            if due_in is not None and due_in <= self.wait_s:
                await asyncio.sleep(max(due_in, 0.0) + 0.01)
                continue
            # Work may have become ready since the dispatchers last looked (the leader's own
            # promotion pass, a NOTIFY in flight): one more claim round must come back empty.
            if await self._claimed_in_confirmation_round(since=claimed_before):
                continue
            logger.info("burst finished: nothing runnable or due soon")
            self.finished()
            return

    async def _claimed_in_confirmation_round(self, *, since: int) -> bool:
        rounds = {d: d.claim_rounds for d in self.dispatchers}
        self.dispatchers.poke()
        # Only a claim that started after the poke can have seen the newest commits.
        while not all(d.idle and d.claim_rounds > rounds[d] for d in self.dispatchers):
            await asyncio.sleep(0.01)
        return self.dispatchers.claimed != since
