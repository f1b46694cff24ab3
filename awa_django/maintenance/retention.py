"""Retention cleanup (leader task): dead-letter entries past ``DLQ_RETENTION_S`` and failed or
cancelled history past ``FAILED_RETENTION_S``, deleted in bounded batches so one pass never
holds long locks or builds a huge transaction; and runtime rows silent for longer than
``RUNTIME_STALE_AFTER_S`` (one small statement)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from psycopg_pool import AsyncConnectionPool

from awa_django.storage.control import delete_expired_dlq, delete_expired_terminal_history
from awa_django.storage.runtime import delete_stale_runtimes


@dataclass(frozen=True, slots=True)
class RetentionResult:
    dlq_deleted: int
    history_deleted: int
    runtimes_deleted: int = 0

    @property
    def changed(self) -> bool:
        return self.dlq_deleted > 0 or self.history_deleted > 0 or self.runtimes_deleted > 0


class RetentionCleaner:
    name = "retention"

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        *,
        interval_s: float,
        dlq_retention_s: float,
        failed_retention_s: float,
        batch_size: int,
        runtime_stale_after_s: float = 60.0,
    ) -> None:
        self._pool = pool
        self.interval_s = interval_s
        self._dlq_retention_s = dlq_retention_s
        self._failed_retention_s = failed_retention_s
        self._batch_size = batch_size
        self._runtime_stale_after_s = runtime_stale_after_s

    async def run_once(self) -> RetentionResult:
        dlq_deleted = await self._drain(delete_expired_dlq, self._dlq_retention_s)
        history_deleted = await self._drain(
            delete_expired_terminal_history, self._failed_retention_s
        )
        async with self._pool.connection() as conn:
            runtimes_deleted = await delete_stale_runtimes(
                conn, stale_after_s=self._runtime_stale_after_s
            )
        return RetentionResult(dlq_deleted, history_deleted, runtimes_deleted)

    async def _drain(self, delete: Callable[..., Awaitable[int]], retention_s: float) -> int:
        deleted = 0
        while True:
            async with self._pool.connection() as conn:
                batch = await delete(conn, retention_s=retention_s, limit=self._batch_size)
            deleted += batch
            if batch < self._batch_size:
                return deleted
