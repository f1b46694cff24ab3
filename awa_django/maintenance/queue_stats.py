"""Queue depth and lag for the ``awa.queue.depth`` and ``awa.queue.lag`` gauges (leader task).

One statement per pass measures every queue; the result goes to telemetry, whose observable
gauges report it when the SDK collects. Only the leader measures, so a fleet reports each queue
once instead of once per worker. Without OpenTelemetry nobody would read the numbers, so the
pass skips the query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg_pool import AsyncConnectionPool

from awa_django.storage.queue import QueueDepth, queue_depths
from awa_django.telemetry import get_telemetry


@dataclass(frozen=True, slots=True)
class QueueStatsResult:
    depths: tuple[QueueDepth, ...]

    @property
    def changed(self) -> bool:
        # A read-only pass: logged at DEBUG like an idle pass of any other task.
        return False


class QueueStats:
    """Measures every queue once per pass and publishes the snapshot to telemetry."""

    name = "queue_stats"

    def __init__(self, pool: AsyncConnectionPool[Any], *, interval_s: float) -> None:
        self._pool = pool
        self.interval_s = interval_s

    async def run_once(self) -> QueueStatsResult:
        telemetry = get_telemetry()
        if not telemetry.enabled:
            return QueueStatsResult(())
        async with self._pool.connection() as conn:
            depths = tuple(await queue_depths(conn))
        # Two intervals (the loop jitters each by up to 10%) before a snapshot that was not
        # refreshed, because this process stopped leading or the pass failed, stops reporting.
        telemetry.queue_depths(depths, stale_after_s=2 * self.interval_s)
        return QueueStatsResult(depths)
