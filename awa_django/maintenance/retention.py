"""Retention cleanup (leader task): dead-letter entries past ``DLQ_RETENTION_S``, failed or
cancelled history past ``FAILED_RETENTION_S``, and finished workflows past the retention of
their jobs (``COMPLETED_RETENTION_S``, or ``FAILED_RETENTION_S`` when they did not complete),
deleted in bounded batches so one pass never holds long locks or builds a huge transaction."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from awa_django.conf import AwaSettings
from awa_django.maintenance.batches import until_short
from awa_django.maintenance.service import Counts, PoolTask, TaskConfig, counted
from awa_django.storage.control import delete_expired_dlq, delete_expired_terminal_history
from awa_django.storage.statement import Statement, run_async
from awa_django.storage.workflows import prune_workflows


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionConfig(TaskConfig):
    dlq_retention_s: float
    failed_retention_s: float
    batch_size: int
    completed_retention_s: float = 86400.0

    @classmethod
    def from_settings(cls, conf: AwaSettings) -> RetentionConfig:
        return cls(
            interval_s=conf.CLEANUP_INTERVAL_S,
            dlq_retention_s=conf.DLQ_RETENTION_S,
            failed_retention_s=conf.FAILED_RETENTION_S,
            batch_size=conf.CLEANUP_BATCH_SIZE,
            completed_retention_s=conf.COMPLETED_RETENTION_S,
        )


@dataclass(frozen=True, slots=True)
class RetentionResult(Counts):
    dlq_deleted: int
    history_deleted: int
    workflows_deleted: int = 0

    def describe(self) -> str:
        said = (
            f"deleted {counted(self.dlq_deleted, 'expired DLQ entry', 'expired DLQ entries')} "
            f"and {counted(self.history_deleted, 'expired failed or cancelled job')}"
        )
        if self.workflows_deleted:
            said += f", and {counted(self.workflows_deleted, 'finished workflow')}"
        return said


class RetentionCleaner(PoolTask[RetentionConfig]):
    name = "retention"

    async def run_once(self) -> RetentionResult:
        config = self._config
        dlq_deleted = await self._deleted(
            lambda limit: delete_expired_dlq(retention_s=config.dlq_retention_s, limit=limit)
        )
        history_deleted = await self._deleted(
            lambda limit: delete_expired_terminal_history(
                retention_s=config.failed_retention_s, limit=limit
            )
        )
        workflows_deleted = await self._deleted(
            lambda limit: prune_workflows(
                completed_s=config.completed_retention_s,
                failed_s=config.failed_retention_s,
                limit=limit,
            )
        )
        return RetentionResult(dlq_deleted, history_deleted, workflows_deleted)

    async def _deleted(self, delete: Callable[[int], Statement[int]]) -> int:
        """How many rows ``delete(limit)`` deleted, run in batches until one comes back short."""
        return await until_short(
            self._pool,
            lambda conn, limit: run_async(conn, delete(limit)),
            batch_size=self._config.batch_size,
        )
