"""Runtime cleanup (leader task): runtime rows silent for longer than ``RUNTIME_STALE_AFTER_S``
belong to processes that died without withdrawing them; one small statement deletes them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg_pool import AsyncConnectionPool

from awa_django.conf import AwaSettings
from awa_django.storage.runtime import delete_stale_runtimes


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeCleanupConfig:
    interval_s: float
    stale_after_s: float

    @classmethod
    def from_settings(cls, conf: AwaSettings) -> RuntimeCleanupConfig:
        return cls(interval_s=conf.CLEANUP_INTERVAL_S, stale_after_s=conf.RUNTIME_STALE_AFTER_S)


@dataclass(frozen=True, slots=True)
class RuntimeCleanupResult:
    deleted: int

    @property
    def changed(self) -> bool:
        return self.deleted > 0


class RuntimeCleaner:
    name = "runtimes"

    def __init__(self, pool: AsyncConnectionPool[Any], config: RuntimeCleanupConfig) -> None:
        self._pool = pool
        self.interval_s = config.interval_s
        self._stale_after_s = config.stale_after_s

    async def run_once(self) -> RuntimeCleanupResult:
        async with self._pool.connection() as conn:
            deleted = await delete_stale_runtimes(conn, stale_after_s=self._stale_after_s)
        return RuntimeCleanupResult(deleted)
