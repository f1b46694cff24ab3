"""Queue depth, lag and throughput samples (leader task).

One statement per pass measures every queue; the pass stores one sample per queue in
``awa.queue_stat_samples`` (with the completions and failures closed since the previous pass),
which the queue-health API and chart read, and hands the depths to telemetry, whose observable
gauges ``awa.queue.depth`` and ``awa.queue.lag`` report them when an OpenTelemetry SDK collects.
Only the leader measures, so a fleet measures each queue once instead of once per worker.

History beyond the samples' two hours: the first pass of each minute also compacts
(``storage.samples.compact_samples``): the minutes that ended ``COMPACT_SETTLE_S`` ago into
1-minute buckets per queue and per kind (kept ``MINUTES_KEEP_S``), the finished quarter hours
into 15-minute buckets (kept ``QUARTERS_KEEP_S``), for the 24-hour and 7-day charts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Final

from psycopg_pool import AsyncConnectionPool

from awa_django.conf import AwaSettings
from awa_django.maintenance.service import PoolTask, TaskConfig, counted
from awa_django.storage.queue import QueueDepth, queue_depths
from awa_django.storage.samples import compact_samples, record_samples
from awa_django.storage.statement import run_async, run_atomic_async
from awa_django.telemetry import get_telemetry

# Samples are kept this long: the health page charts the last hour.
SAMPLE_KEEP_S: Final = 2 * 3600.0
# A minute is compacted this long after it ended: a completion batch whose transaction began in
# it (its closures' finalized_at) has committed by then.
COMPACT_SETTLE_S: Final = 15.0
# 1-minute buckets are kept 25 hours (the 24-hour chart), 15-minute ones 8 days (the 7-day
# chart). A pass catches up at most the samples' window of minutes and the minute buckets'
# window of quarters (a leader that was down longer leaves a gap).
MINUTES_KEEP_S: Final = 25 * 3600.0
QUARTERS_KEEP_S: Final = 8 * 86400.0


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueStatsConfig(TaskConfig):
    @classmethod
    def from_settings(cls, conf: AwaSettings) -> QueueStatsConfig:
        return cls(interval_s=conf.QUEUE_STATS_INTERVAL_S)


@dataclass(frozen=True, slots=True)
class QueueStatsResult:
    depths: tuple[QueueDepth, ...]

    @property
    def changed(self) -> bool:
        # A measuring pass: logged at DEBUG like an idle pass of any other task.
        return False

    def describe(self) -> str:
        return f"measured {counted(len(self.depths), 'queue')}"


class QueueSampler(PoolTask[QueueStatsConfig]):
    """Measures every queue once per pass, stores the samples and publishes to telemetry."""

    name = "queue_stats"

    def __init__(self, pool: AsyncConnectionPool[Any], config: QueueStatsConfig) -> None:
        super().__init__(pool, config)
        # The minute (since the epoch) last compacted in this process: once a minute is enough.
        self._compacted_minute: int | None = None

    async def run_once(self) -> QueueStatsResult:
        async with self._pool.connection() as conn:
            depths = tuple(await run_async(conn, queue_depths()))
            await run_atomic_async(
                conn, record_samples(depths, interval_s=self.interval_s, keep_s=SAMPLE_KEEP_S)
            )
            minute = int((time.time() - COMPACT_SETTLE_S) // 60)
            if minute != self._compacted_minute:
                await run_atomic_async(
                    conn,
                    compact_samples(
                        settle_s=COMPACT_SETTLE_S,
                        minutes_catch_up_s=SAMPLE_KEEP_S,
                        quarters_catch_up_s=MINUTES_KEEP_S,
                        keep_minutes_s=MINUTES_KEEP_S,
                        keep_quarters_s=QUARTERS_KEEP_S,
                    ),
                )
                self._compacted_minute = minute
        telemetry = get_telemetry()
        if telemetry.enabled:
            # Two intervals (the loop jitters each by up to 10%) before a snapshot that was not
            # refreshed, because this process stopped leading or the pass failed, stops
            # reporting.
            telemetry.queue_depths(depths, stale_after_s=2 * self.interval_s)
        return QueueStatsResult(depths)
