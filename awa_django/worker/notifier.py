"""LISTEN/NOTIFY wakeups: one connection listens on the ``awa`` channel for all queues.

Enqueue and promotion send ``pg_notify('awa', <queue>)``; Postgres delivers it at commit. The
payload names the queue, so one channel serves every queue and no identifier is ever built
from a queue name. Notifications are only a hint: dispatchers also poll, so a lost notification
or a dropped connection delays work by at most the poll interval, and the listener reconnects.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from psycopg import AsyncConnection

logger = logging.getLogger(__name__)

CHANNEL = "awa"


class Notifier:
    """Calls ``on_queue(queue)`` for every notification until stopped."""

    def __init__(self, connect: Callable[[], object], on_queue: Callable[[str], None]) -> None:
        self._connect = connect
        self._on_queue = on_queue
        self.listening = asyncio.Event()

    async def run(self, stopping: asyncio.Event) -> None:
        delay = 0.5
        while not stopping.is_set():
            try:
                conn: AsyncConnection[object] = await self._connect()  # type: ignore[misc]
                async with conn:
                    await conn.execute("LISTEN awa")
                    self.listening.set()
                    delay = 0.5
                    async for notify in conn.notifies():
                        self._on_queue(notify.payload)
            except asyncio.CancelledError:
                raise
            except Exception:
                self.listening.clear()
                logger.exception("listen connection lost, reconnecting in %.1fs", delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
