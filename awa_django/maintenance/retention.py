"""Retention cleanup (leader task): dead-letter entries past ``DLQ_RETENTION_S`` and failed or
cancelled history past ``FAILED_RETENTION_S``, deleted in bounded batches so one pass never
holds long locks or builds a huge transaction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg_pool import AsyncConnectionPool

from awa_django.conf import AwaSettings
from awa_django.maintenance.batches import until_short
from awa_django.maintenance.service import counted
from awa_django.storage.control import delete_expired_dlq, delete_expired_terminal_history


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionConfig:
    interval_s: float
    dlq_retention_s: float
    failed_retention_s: float
    batch_size: int

    @classmethod
    def from_settings(cls, conf: AwaSettings) -> RetentionConfig:
        return cls(
            interval_s=conf.CLEANUP_INTERVAL_S,
            dlq_retention_s=conf.DLQ_RETENTION_S,
            failed_retention_s=conf.FAILED_RETENTION_S,
            batch_size=conf.CLEANUP_BATCH_SIZE,
        )


@dataclass(frozen=True, slots=True)
class RetentionResult:
    dlq_deleted: int
    history_deleted: int

    @property
    def changed(self) -> bool:
        return self.dlq_deleted > 0 or self.history_deleted > 0

    def describe(self) -> str:
        return (
            f"deleted {counted(self.dlq_deleted, 'expired DLQ entry', 'expired DLQ entries')} "
            f"and {counted(self.history_deleted, 'expired failed or cancelled job')}"
        )


class RetentionCleaner:
    name = "retention"

    def __init__(self, pool: AsyncConnectionPool[Any], config: RetentionConfig) -> None:
        self._pool = pool
        self._config = config
        self.interval_s = config.interval_s

    async def run_once(self) -> RetentionResult:
        dlq_deleted = await until_short(
            self._pool,
            lambda conn, limit: delete_expired_dlq(
                conn, retention_s=self._config.dlq_retention_s, limit=limit
            ),
            batch_size=self._config.batch_size,
        )
        history_deleted = await until_short(
            self._pool,
            lambda conn, limit: delete_expired_terminal_history(
                conn, retention_s=self._config.failed_retention_s, limit=limit
            ),
            batch_size=self._config.batch_size,
        )
        return RetentionResult(dlq_deleted, history_deleted)
