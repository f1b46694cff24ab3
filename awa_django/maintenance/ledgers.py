"""Ledger cleanup (leader task): the rows of which only a queue's newest is ever read, the rate
ledger (one per fleet-limited claim) and the lane marks (appended by claims of queues with many
lanes), are deleted but the newest, in bounded batches. Dead tuples stay bounded by what one
interval appends."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from awa_django.conf import AwaSettings
from awa_django.maintenance.batches import until_short
from awa_django.maintenance.service import Counts, PoolTask, TaskConfig, counted
from awa_django.storage.lanes import delete_superseded_lane_marks
from awa_django.storage.rate_limits import delete_superseded_rate_entries
from awa_django.storage.statement import run_async


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerConfig(TaskConfig):
    batch_size: int

    @classmethod
    def from_settings(cls, conf: AwaSettings) -> LedgerConfig:
        return cls(interval_s=conf.CLEANUP_INTERVAL_S, batch_size=conf.CLEANUP_BATCH_SIZE)


@dataclass(frozen=True, slots=True)
class LedgerResult(Counts):
    deleted: int

    def describe(self) -> str:
        return f"deleted {counted(self.deleted, 'superseded ledger row')} (rate limits, lane marks)"


class LedgerCleaner(PoolTask[LedgerConfig]):
    name = "ledgers"

    async def run_once(self) -> LedgerResult:
        batch_size = self._config.batch_size
        deleted = await until_short(self._pool, _rate_batch, batch_size=batch_size)
        deleted += await until_short(self._pool, _lane_batch, batch_size=batch_size)
        return LedgerResult(deleted)


def _rate_batch(conn: AsyncConnection[Any], limit: int) -> Awaitable[int]:
    return run_async(conn, delete_superseded_rate_entries(limit=limit))


def _lane_batch(conn: AsyncConnection[Any], limit: int) -> Awaitable[int]:
    return run_async(conn, delete_superseded_lane_marks(limit=limit))
