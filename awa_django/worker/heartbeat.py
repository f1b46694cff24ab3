"""Per-process heartbeats: one statement keeps every long-running attempt of this worker alive.

Every ``interval_s`` the heartbeat collects the attempts that have run for at least one interval
(short attempts never need one: their receipt is their liveness until the staleness window) and
those whose handler reported progress since the last beat, and sends them in one batch. Storage
answers which of them are still open; an attempt that is not was closed under us (rescued or
cancelled), so its cancel flag is raised and its late result will be stale.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from psycopg_pool import AsyncConnectionPool

from awa_django.storage.execution import LiveAttempt, heartbeat_attempts
from awa_django.worker.dispatcher import RunningAttempt

logger = logging.getLogger(__name__)


class Heartbeat:
    """Heartbeats the attempts ``running()`` yields, every ``interval_s``."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        running: Callable[[], Iterable[RunningAttempt]],
        *,
        interval_s: float,
        claimed_by: str,
    ) -> None:
        self._pool = pool
        self._running = running
        self._interval_s = interval_s
        self._claimed_by = claimed_by

    async def run(self, stopped: asyncio.Event) -> None:
        while not stopped.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopped.wait(), timeout=self._interval_s)
            if stopped.is_set():
                return
            try:
                await self.beat_once()
            except Exception:
                logger.exception("heartbeat failed")

    async def beat_once(self) -> int:
        """Send one heartbeat batch; returns how many attempts it covered."""
        now = time.monotonic()
        batch: list[tuple[RunningAttempt, LiveAttempt]] = []
        for attempt in self._running():
            progress, checkpoint, changed = attempt.ctx.state.take_unflushed()
            if not changed and now - attempt.started < self._interval_s:
                continue
            live = LiveAttempt.of(
                attempt.job,
                progress=progress if changed else None,
                checkpoint=checkpoint if changed else None,
            )
            batch.append((attempt, live))
        if not batch:
            return 0
        try:
            async with self._pool.connection() as conn:
                still_open = await heartbeat_attempts(
                    conn, [live for _, live in batch], claimed_by=self._claimed_by
                )
        except Exception:
            for attempt, live in batch:
                if live.progress is not None or live.checkpoint is not None:
                    attempt.ctx.state.mark_unflushed()
            raise
        for attempt, live in batch:
            if (live.job_id, live.run_lease) not in still_open:
                logger.warning(
                    "attempt closed elsewhere, cancelling job_id=%s run_lease=%s",
                    live.job_id,
                    live.run_lease,
                )
                attempt.ctx.cancel_flag.set()
        return len(batch)
