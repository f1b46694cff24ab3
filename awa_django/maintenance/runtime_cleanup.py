"""Runtime cleanup (leader task): runtime rows (``awa.runtime_instances``) silent for longer
than ``RUNTIME_STALE_AFTER_S`` belong to processes that died without withdrawing them; one small
statement deletes them, and a second the recorded descriptor versions (``awa.declared_versions``)
that no runtime row and no stored descriptor declares any more. The pass logs as
``maintenance runtimes``, the operators' name for these rows (``awa.runtimes``, the admin's
Runtimes page)."""

from __future__ import annotations

from dataclasses import dataclass

from awa_django.conf import AwaSettings
from awa_django.maintenance.service import Counts, PoolTask, TaskConfig, counted
from awa_django.storage.runtime import delete_stale_runtimes, delete_undeclared_versions
from awa_django.storage.statement import run_async


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeCleanupConfig(TaskConfig):
    stale_after_s: float

    @classmethod
    def from_settings(cls, conf: AwaSettings) -> RuntimeCleanupConfig:
        return cls(interval_s=conf.CLEANUP_INTERVAL_S, stale_after_s=conf.RUNTIME_STALE_AFTER_S)


@dataclass(frozen=True, slots=True)
class RuntimeCleanupResult(Counts):
    deleted: int
    versions_deleted: int = 0

    def describe(self) -> str:
        return (
            f"deleted {counted(self.deleted, 'silent runtime')} and "
            f"{counted(self.versions_deleted, 'descriptor version')} nothing declares any more"
        )


class RuntimeCleaner(PoolTask[RuntimeCleanupConfig]):
    name = "runtimes"

    async def run_once(self) -> RuntimeCleanupResult:
        stale_after_s = self._config.stale_after_s
        async with self._pool.connection() as conn:
            deleted = await run_async(conn, delete_stale_runtimes(stale_after_s=stale_after_s))
            versions = await run_async(
                conn, delete_undeclared_versions(stale_after_s=stale_after_s)
            )
        return RuntimeCleanupResult(deleted, versions)
