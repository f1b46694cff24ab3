"""Instance reporting: a worker (or ``awa_maintenance``) publishes its declarations (DLQ
policies, queue and kind descriptors) and a snapshot of itself, its runtime instance row, at
start, then every ``interval_s`` until it stops, and deletes that row on a clean exit. While
its snapshot does not change, a process refreshes its row only every ``idle_intervals``.

Publishing at start, before the first claim, is what makes a queue's DLQ policy known to
``awa.close_attempts`` by the time its jobs can fail. The declarations go again only when a
snapshot finds the stored ones differ, looked at once every ``DECLARATIONS_EVERY`` intervals
(see there).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from importlib import metadata
from typing import Any

from psycopg_pool import AsyncConnectionPool

from awa_django.core.events import wait_for_any
from awa_django.ops.cron_publish import publish_schedules
from awa_django.ops.descriptors import Declarations
from awa_django.storage.runtime import (
    RuntimeSnapshot,
    delete_runtime,
    publish_declarations,
    touch_snapshot,
    touch_snapshot_reading_concurrency,
    write_snapshot,
)
from awa_django.storage.statement import run_async

logger = logging.getLogger(__name__)

# The snapshots that compare the stored declarations with the process's: one per this many
# intervals. The declarations do not change while a process runs; it publishes them with its
# first snapshot, then again only when such a snapshot finds what is stored differs from them (a
# worker of another version wrote its own during a rolling deploy, or a row went), so the stored
# descriptors and DLQ policies come back to a live worker's within this many intervals, and two
# versions of a fleet do not rewrite each other's at every snapshot. Republishing them with
# every such snapshot (four upserts in its statement) was most of what an idle worker's snapshot
# cost the server, in planning more than in running (#37).
DECLARATIONS_EVERY = 6


def idle_intervals(interval_s: float, stale_after_s: float) -> int:
    """How many intervals apart a process refreshes its row while its snapshot does not change:
    as many as fit in a third of ``stale_after_s``, so that a live process refreshes its row at
    least three times within the window that judges it dead (RUNTIME_STALE_AFTER_S). Each
    refresh of an idle process was its own transaction, the largest share of what an idle
    fleet's size cost the server (#37)."""
    return max(1, int(stale_after_s / 3 // interval_s))


def package_version() -> str:
    try:
        return metadata.version("awa-django")
    except metadata.PackageNotFoundError:
        return "unknown"


class RuntimeReporter:
    """Writes one process's declarations and snapshot; ``state()`` supplies the live fields
    (in-flight count, leader flag, health, shutting down). As a service: ``start`` writes the
    declared cron ``schedules`` and the first snapshot, then reports until ``stop``, which
    deletes the row; ``stopping`` and ``changed`` are what ``run`` watches. Each snapshot
    written whole tells ``on_peers`` how many live processes compete for this one's roles and
    ``on_concurrency`` the live concurrency of its queues; with ``refresh_reads_concurrency``
    (a poll-only process, which no notification tells of a change) each refresh of an
    unchanged snapshot tells ``on_concurrency`` too."""

    name = "reporter"

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        *,
        instance_id: str,
        queues: dict[str, int],
        declared: Declarations,
        interval_s: float,
        stale_after_s: float,
        started_at: datetime,
        state: Callable[[], tuple[int, bool, bool, bool]],
        schedules: list[dict[str, Any]] | None = None,
        stopping: asyncio.Event | None = None,
        changed: asyncio.Event | None = None,
        on_peers: Callable[[int], None] | None = None,
        concurrency: Callable[[], dict[str, int]] | None = None,
        on_concurrency: Callable[[dict[str, int]], None] | None = None,
        refresh_reads_concurrency: bool = False,
    ) -> None:
        self._pool = pool
        self._on_peers = on_peers
        self._on_concurrency = on_concurrency
        self._refresh_reads_concurrency = refresh_reads_concurrency
        self._schedules = schedules or []
        self._stopping = stopping or asyncio.Event()
        self._changed = changed
        self._stopped = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # Each queue's concurrency now (an operator may change it live), else ``queues``.
        self._concurrency = concurrency
        self._declared = declared
        self._interval_s = interval_s
        self._idle_intervals = idle_intervals(interval_s, stale_after_s)
        # A process refreshes its row at least every idle_intervals: one silent for three of
        # those is gone.
        self._fresh_s = 3 * self._idle_intervals * interval_s
        self._state = state
        self._reports = 0  # calls of report_once so far
        self._since_declared = 0  # calls since the declarations were last published
        self._since_refreshed = 0  # calls since the row was last written or refreshed
        self._written: RuntimeSnapshot | None = None  # the last one written whole
        # The fields that never change; snapshot() fills in the live ones.
        self._base = RuntimeSnapshot(
            instance_id=instance_id,
            hostname=socket.gethostname(),
            pid=os.getpid(),
            version=package_version(),
            started_at=started_at,
            queues=queues,
            in_flight=0,
            is_leader=False,
            healthy=True,
            shutting_down=False,
        )

    def snapshot(self) -> RuntimeSnapshot:
        in_flight, is_leader, healthy, shutting_down = self._state()
        return replace(
            self._base,
            queues=self._base.queues if self._concurrency is None else self._concurrency(),
            in_flight=in_flight,
            is_leader=is_leader,
            healthy=healthy,
            shutting_down=shutting_down,
        )

    async def report_once(self) -> None:
        """Report once an interval. A snapshot that changed (and the first two: by the second,
        a fleet that started together has written its rows and each process learns how many
        peers it has), and one every ``DECLARATIONS_EVERY`` calls, is written whole, in one
        statement that also reads the peers, the live concurrency and whether the stored
        declarations differ from this process's. The first publishes the declarations in that
        statement; one every ``DECLARATIONS_EVERY`` calls publishes them again after it, in
        their own, when they differ. An unchanged one only refreshes its row's
        ``last_seen_at``, which is what readers judge liveness by, and only once
        ``idle_intervals`` calls passed since the row was last written: an idle process sends
        nothing in between (#37)."""
        self._since_declared += 1
        self._since_refreshed += 1
        first = self._reports == 0
        declarations = first or self._since_declared >= DECLARATIONS_EVERY
        snapshot = self.snapshot()
        whole = declarations or self._reports == 1 or snapshot != self._written
        if not whole and self._since_refreshed < self._idle_intervals:
            self._reports += 1
            return
        report = None
        concurrency = None  # the live concurrency, when a statement read it
        async with self._pool.connection() as conn:
            touched = False
            if not whole and self._refresh_reads_concurrency:
                concurrency = await run_async(
                    conn,
                    touch_snapshot_reading_concurrency(
                        instance_id=snapshot.instance_id, queues=snapshot.queues
                    ),
                )
                touched = concurrency is not None
            elif not whole:
                touched = await run_async(conn, touch_snapshot(instance_id=snapshot.instance_id))
            if not touched:
                report = await run_async(
                    conn,
                    write_snapshot(snapshot, self._declared, fresh_s=self._fresh_s, publish=first),
                )
                if declarations and report.diverged:
                    await run_async(conn, publish_declarations(self._declared))
        self._written = snapshot
        self._reports += 1
        self._since_refreshed = 0
        if declarations:
            self._since_declared = 0
        if report is not None:
            concurrency = report.concurrency
            if self._on_peers is not None:
                self._on_peers(report.peers)
        if concurrency is not None and self._on_concurrency is not None:
            self._on_concurrency(concurrency)

    async def run(
        self,
        stopping: asyncio.Event,
        stopped: asyncio.Event,
        changed: asyncio.Event | None = None,
    ) -> None:
        """Report every ``interval_s`` until ``stopped``, once more as soon as ``stopping`` is
        set (so the row says shutting down while in-flight jobs drain), and whenever
        ``changed`` is set (leadership gained or lost: a probe that reads the rows must not
        see a fleet without a leader for a whole interval after a worker took the lock). A
        failed write is logged and retried next time; the row just ages meanwhile."""
        announced = False
        while not stopped.is_set():
            await wait_for_any(
                stopped,
                *(() if announced else (stopping,)),
                *(() if changed is None else (changed,)),
                timeout=self._interval_s,
            )
            if stopped.is_set():
                return
            announced = stopping.is_set()
            if changed is not None:
                changed.clear()
            try:
                await self.report_once()
            except Exception:
                logger.exception("runtime snapshot failed")

    async def start(self) -> None:
        await publish_schedules(self._pool, self._schedules)
        # Before the first claim: close_attempts must know the DLQ policies of our queues.
        await self.report_once()
        self._task = asyncio.create_task(
            self.run(self._stopping, self._stopped, self._changed), name="awa-reporter"
        )

    async def stop(self) -> None:
        self._stopped.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        await self.withdraw()

    async def withdraw(self) -> None:
        """Delete this process's row (clean shutdown)."""
        try:
            async with self._pool.connection() as conn:
                await run_async(conn, delete_runtime(instance_id=self._base.instance_id))
        except Exception:
            logger.exception("could not delete the runtime row; the leader will")
