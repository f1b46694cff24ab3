"""Promotion: moves due scheduled and retryable jobs into the ready ring (leader task).

``FOR UPDATE SKIP LOCKED`` in the promotion statement lets a burst worker promote too without
moving a job twice; the literal states in each query keep the partial indexes in use however
large the backlog.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from awa_django.conf import AwaSettings
from awa_django.maintenance.batches import until_short
from awa_django.maintenance.service import Counts, PoolTask, TaskConfig, counted
from awa_django.storage.backlog import promote_due
from awa_django.storage.statement import run_async
from awa_django.telemetry import get_telemetry


async def _promote(conn: AsyncConnection[Any], limit: int) -> int:
    moved = 0
    for statement in promote_due(limit=limit):
        moved += await run_async(conn, statement)
    return moved


@dataclass(frozen=True, slots=True, kw_only=True)
class PromoterConfig(TaskConfig):
    batch_size: int

    @classmethod
    def from_settings(cls, conf: AwaSettings) -> PromoterConfig:
        return cls(interval_s=conf.PROMOTE_INTERVAL_S, batch_size=conf.PROMOTE_BATCH_SIZE)


@dataclass(frozen=True, slots=True)
class PromoterResult(Counts):
    moved: int

    def describe(self) -> str:
        if not self.moved:
            return "no scheduled or retrying job due"
        return f"moved {counted(self.moved, 'due job')} into the ready queue"


class Promoter(PoolTask[PromoterConfig]):
    """Moves due deferred jobs, repeating at once while batches come back full."""

    name = "promoter"

    async def run_once(self) -> PromoterResult:
        moved = await until_short(
            self._pool,
            _promote,
            batch_size=self._config.batch_size,
        )
        get_telemetry().promoted(moved)
        return PromoterResult(moved)
