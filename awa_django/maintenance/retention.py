"""Retention cleanup (leader task): dead-letter entries past ``DLQ_RETENTION_S`` and failed or
cancelled history past ``FAILED_RETENTION_S``, deleted in bounded batches so one pass never
holds long locks or builds a huge transaction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg_pool import AsyncConnectionPool

from awa_django.maintenance.batches import until_short
from awa_django.storage.control import delete_expired_dlq, delete_expired_terminal_history


@dataclass(frozen=True, slots=True)
class RetentionResult:
    dlq_deleted: int
    history_deleted: int

    @property
    def changed(self) -> bool:
        return self.dlq_deleted > 0 or self.history_deleted > 0


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
    ) -> None:
        self._pool = pool
        self.interval_s = interval_s
        self._dlq_retention_s = dlq_retention_s
        self._failed_retention_s = failed_retention_s
        self._batch_size = batch_size

    async def run_once(self) -> RetentionResult:
        dlq_deleted = await until_short(
            self._pool,
            lambda conn, limit: delete_expired_dlq(
                conn, retention_s=self._dlq_retention_s, limit=limit
            ),
            batch_size=self._batch_size,
        )
        history_deleted = await until_short(
            self._pool,
            lambda conn, limit: delete_expired_terminal_history(
                conn, retention_s=self._failed_retention_s, limit=limit
            ),
            batch_size=self._batch_size,
        )
        return RetentionResult(dlq_deleted, history_deleted)
