"""Unique-claim cleanup (leader task): drops claims that can no longer conflict.

Claims are released lazily by the next enqueue of their key, so correctness never waits for
this task; it only keeps ``awa.unique_claims`` from growing with keys nobody enqueues again
(period buckets that ended, holders that finished or were pruned). Each pass checks at most
``max_per_pass`` keys, resuming where the previous pass stopped, so a large table costs a bounded
amount of work per pass and is covered over several.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from awa_django.conf import AwaSettings
from awa_django.maintenance.batches import in_batches
from awa_django.maintenance.service import Counts, PoolTask, TaskConfig, counted
from awa_django.storage.statement import run_async
from awa_django.storage.unique import sweep_unique_claims

# Keys checked per statement: each takes one advisory lock until the statement commits.
SWEEP_BATCH: Final = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class UniqueSweepConfig(TaskConfig):
    max_per_pass: int

    @classmethod
    def from_settings(cls, conf: AwaSettings) -> UniqueSweepConfig:
        return cls(interval_s=conf.CLEANUP_INTERVAL_S, max_per_pass=10 * conf.CLEANUP_BATCH_SIZE)


@dataclass(frozen=True, slots=True)
class UniqueSweepResult(Counts):
    deleted: int

    def describe(self) -> str:
        return f"dropped {counted(self.deleted, 'unique claim')} that can no longer conflict"


class UniqueClaimSweeper(PoolTask[UniqueSweepConfig]):
    name = "unique_claims"

    def __init__(self, pool: AsyncConnectionPool[Any], config: UniqueSweepConfig) -> None:
        super().__init__(pool, config)
        self._after: bytes | None = None

    async def run_once(self) -> UniqueSweepResult:
        deleted = await in_batches(
            self._pool, self._sweep_batch, max_batches=-(-self._config.max_per_pass // SWEEP_BATCH)
        )
        return UniqueSweepResult(deleted)

    async def _sweep_batch(self, conn: AsyncConnection[Any]) -> tuple[int, bool]:
        deleted, self._after = await run_async(
            conn, sweep_unique_claims(limit=SWEEP_BATCH, after=self._after)
        )
        # The scan reached the end: the next pass starts from the first key again.
        return deleted, self._after is not None
