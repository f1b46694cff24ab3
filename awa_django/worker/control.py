"""Live concurrency: the concurrency an operator sets on a queue (``awa.queues.set_concurrency``,
the queue health page, ``awa_queue concurrency``) reaches this process's dispatchers without a
restart.

How it works: the change is a column of the queue's control row, and its commit sends
``pg_notify('awa_control', <queue>)``; the session hands that here and one read of our queues'
rows follows. The rows are also read at start and whenever the session is (back) up; the
periodic reads are the runtime snapshot's statements (``apply``): those a worker writes whole,
the safety net for a notification sent while the connection was down, and in a poll-only
worker, which has no session, every refresh of an unchanged snapshot too (#37). A
dispatcher's permits are resized in place (``Permits.resize``): raised, it claims at once;
lowered, running jobs finish and new ones start only below the new value.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from psycopg_pool import AsyncConnectionPool

from awa_django.core.events import wait_for_any
from awa_django.storage.control import concurrency_overrides
from awa_django.storage.statement import run_async
from awa_django.worker.dispatcher import Dispatcher
from awa_django.worker.handler_threads import HandlerThreads
from awa_django.worker.service import Loop

logger = logging.getLogger(__name__)


class ConcurrencyControl(Loop):
    """Applies the live concurrency of this process's queues to their dispatchers (a service:
    it reads the rows once as it starts, before the first claim, then runs its loop)."""

    name = "concurrency"

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        dispatchers: Mapping[str, Dispatcher],
        *,
        configured: Mapping[str, int],
        threads: HandlerThreads | None,
    ) -> None:
        self._pool = pool
        self._dispatchers = dispatchers
        self._configured = dict(configured)
        # None in weighted mode: its threads already cover the process-wide limit, which a
        # queue's cap can only lower.
        self.threads = threads
        self._set: dict[str, int] = {}  # queue -> live concurrency applied now
        self._changed = asyncio.Event()

    def poke(self, queue: str | None = None) -> None:
        """Read the rows again soon (a notification for ``queue``, or the session is back)."""
        if queue is None or queue in self._dispatchers:
            self._changed.set()

    def effective(self) -> dict[str, int]:
        """Each queue's concurrency as this process runs it now (for its runtime snapshot)."""
        return {q: self._set.get(q, n) for q, n in self._configured.items()}

    async def refresh(self) -> None:
        async with self._pool.connection() as conn:
            found = await run_async(conn, concurrency_overrides(queues=list(self._dispatchers)))
        self.apply(found)

    def apply(self, found: Mapping[str, int]) -> None:
        """Run each queue at ``found`` (the values operators set, by queue), the configured
        value for a queue it leaves out."""
        found = {q: n for q, n in found.items() if q in self._dispatchers}
        if found == self._set:
            return
        if self.threads is not None:
            # Before the dispatchers claim with their new permits: each sync job needs a thread.
            self.threads.grow_to(sum({**self._configured, **found}.values()))
        for queue, dispatcher in self._dispatchers.items():
            wanted = found.get(queue)
            if wanted == self._set.get(queue):
                continue
            dispatcher.set_concurrency(wanted)
            logger.info(
                "queue concurrency changed queue=%s concurrency=%s source=%s",
                queue,
                self._configured[queue] if wanted is None else wanted,
                "configured" if wanted is None else "operator",
            )
        self._set = found

    async def start(self) -> None:
        # A queue an operator set keeps its value across restarts, from the first claim on.
        await self._refresh_logged()
        await super().start()

    async def run(self, stopped: asyncio.Event) -> None:
        while not stopped.is_set():
            await wait_for_any(self._changed, stopped)
            if stopped.is_set():
                return
            self._changed.clear()
            await self._refresh_logged()

    async def _refresh_logged(self) -> None:
        # A failed read leaves the values as they were; the next notification or interval
        # reads again.
        try:
            await self.refresh()
        except Exception:
            logger.exception("reading the queues' live concurrency failed")
