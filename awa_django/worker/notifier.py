"""LISTEN/NOTIFY wakeups: one connection listens for new work and for cancelled attempts.

Commits that publish work send ``pg_notify('awa', <queue>)`` while a worker waits for that
queue (``worker.wake``); cancel and rescue send ``pg_notify('awa_cancel',
'<job_id>:<run_lease>')``. Postgres delivers both at commit. The payloads carry the names, so no
identifier is ever built from a queue name. Notifications are a hint: dispatchers also poll and
heartbeats report closed attempts, so a lost notification or a dropped connection only delays
things; the listener reconnects, and every dispatcher claims once it listens again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final

from psycopg import AsyncConnection

logger = logging.getLogger(__name__)

WORK_CHANNEL: Final = "awa"
CANCEL_CHANNEL: Final = "awa_cancel"
# A sequential callback wait was resumed: '<job_id>:<run_lease>'.
CALLBACK_CHANNEL: Final = "awa_callback"
LISTEN_STATEMENTS: Final = ("LISTEN awa", "LISTEN awa_cancel", "LISTEN awa_callback")


class Notifier:
    """Calls ``on_queue(queue)`` for new work and ``on_cancel(job_id, run_lease)`` for closed
    attempts, until stopped."""

    def __init__(
        self,
        connect: Callable[[], Awaitable[AsyncConnection[Any]]],
        *,
        on_queue: Callable[[str], None],
        on_cancel: Callable[[int, int], None],
        on_callback: Callable[[int, int], None] | None = None,
        on_listening: Callable[[], None] | None = None,
    ) -> None:
        self._connect = connect
        self._on_queue = on_queue
        self._on_cancel = on_cancel
        self._on_callback = on_callback
        self._on_listening = on_listening
        self.listening = asyncio.Event()

    async def run(self, stopping: asyncio.Event) -> None:
        delay = 0.5
        while not stopping.is_set():
            try:
                async with await self._connect() as conn:
                    for statement in LISTEN_STATEMENTS:
                        await conn.execute(statement)
                    self.listening.set()
                    if self._on_listening is not None:
                        self._on_listening()
                    delay = 0.5
                    async for notify in conn.notifies():
                        self._dispatch(notify.channel, notify.payload)
            except asyncio.CancelledError:
                raise
            except Exception:
                self.listening.clear()
                logger.exception("listen connection lost, reconnecting in %.1fs", delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

    def _dispatch(self, channel: str, payload: str) -> None:
        if channel == WORK_CHANNEL:
            self._on_queue(payload)
        elif channel == CANCEL_CHANNEL:
            job_id, _, run_lease = payload.partition(":")
            if job_id.isdigit() and run_lease.isdigit():
                self._on_cancel(int(job_id), int(run_lease))
        elif channel == CALLBACK_CHANNEL and self._on_callback is not None:
            job_id, _, run_lease = payload.partition(":")
            if job_id.isdigit() and run_lease.isdigit():
                self._on_callback(int(job_id), int(run_lease))
