"""Rate ledger cleanup (leader task): fleet-limited claims append one ledger row each and only
a queue's newest row is read, so older rows are deleted in bounded batches. Dead tuples stay
bounded by the rate-limited claims of one interval."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg_pool import AsyncConnectionPool

from awa_django.conf import AwaSettings
from awa_django.maintenance.batches import until_short
from awa_django.maintenance.service import counted
from awa_django.storage.rate_limits import delete_superseded_rate_entries


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLedgerConfig:
    interval_s: float
    batch_size: int

    @classmethod
    def from_settings(cls, conf: AwaSettings) -> RateLedgerConfig:
        return cls(interval_s=conf.CLEANUP_INTERVAL_S, batch_size=conf.CLEANUP_BATCH_SIZE)


@dataclass(frozen=True, slots=True)
class RateLedgerResult:
    deleted: int

    @property
    def changed(self) -> bool:
        return self.deleted > 0

    def describe(self) -> str:
        return f"deleted {counted(self.deleted, 'superseded rate-limit ledger row')}"


class RateLedgerCleaner:
    name = "rate_ledger"

    def __init__(self, pool: AsyncConnectionPool[Any], config: RateLedgerConfig) -> None:
        self._pool = pool
        self.interval_s = config.interval_s
        self._batch_size = config.batch_size

    async def run_once(self) -> RateLedgerResult:
        deleted = await until_short(
            self._pool,
            lambda conn, limit: delete_superseded_rate_entries(conn, limit=limit),
            batch_size=self._batch_size,
        )
        return RateLedgerResult(deleted)
