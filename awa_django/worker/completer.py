"""Writes completions in batches: one guarded statement serves many finished jobs.

Executors ``submit`` completions; a flush task writes whatever has accumulated as soon as the
batch is full or ``flush_s`` after the first item arrived. Stale completions (older run_lease,
or an attempt someone else closed) come back from storage as not-closed and are logged, never
raised.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from psycopg_pool import AsyncConnectionPool

from awa_django.storage.execution import Completion, close_attempts

logger = logging.getLogger(__name__)


class Completer:
    """Batches completions and writes them on a pooled connection."""

    def __init__(self, pool: AsyncConnectionPool[Any], *, batch_size: int, flush_s: float) -> None:
        self._pool = pool
        self._batch_size = batch_size
        self._flush_s = flush_s
        self._pending: list[Completion] = []
        self._arrived = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self.stale_count = 0
        self.written_count = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="awa-completer")

    def submit(self, completion: Completion) -> None:
        self._pending.append(completion)
        self._idle.clear()
        self._arrived.set()

    async def drain(self) -> None:
        """Wait until everything submitted so far is written."""
        await self._idle.wait()

    async def stop(self) -> None:
        await self.drain()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            await self._arrived.wait()
            if len(self._pending) < self._batch_size:
                await asyncio.sleep(self._flush_s)
            self._arrived.clear()
            while self._pending:
                batch = self._pending[: self._batch_size]
                del self._pending[: self._batch_size]
                await self._write(batch)
            if not self._pending:
                self._idle.set()

    async def _write(self, batch: list[Completion]) -> None:
        # A failed write is retried until it lands: dropping it would leave the attempts open
        # until rescue, and every write is idempotent under the run_lease guard.
        delay = 0.1
        while True:
            try:
                async with self._pool.connection() as conn:
                    closed = await close_attempts(conn, batch)
                break
            except Exception:
                logger.exception("completion batch failed, retrying size=%s", len(batch))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        self.written_count += len(closed)
        for completion in batch:
            if (completion.job_id, completion.run_lease) not in closed:
                self.stale_count += 1
                logger.warning(
                    "stale completion ignored job_id=%s run_lease=%s outcome=%s",
                    completion.job_id,
                    completion.run_lease,
                    completion.outcome.value,
                )
