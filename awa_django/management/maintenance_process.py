"""The ``awa_maintenance`` process: a ``Maintainer`` with what any awa process publishes (its
declared schedules, its declarations and runtime snapshot), and no worker: no dispatchers,
completer, notifier or heartbeat.

It logs the same start and stop lines as a worker, with no queues and nothing claimed, so
operators and supervisors read both kinds of process the same way.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial

from asgiref.sync import sync_to_async
from django.db import connections as db_connections

from awa_django.conf import AwaSettings
from awa_django.core.retry import RetryPolicy
from awa_django.declarations.jobs import registry
from awa_django.maintenance.maintainer import Maintainer, MaintenanceConfig
from awa_django.maintenance.promoter import Promoter, PromoterConfig
from awa_django.ops.cron_publish import declared_schedule_rows, publish_schedules
from awa_django.ops.descriptors import Declarations, declared
from awa_django.storage import connections
from awa_django.storage.session import SharedSession
from awa_django.worker.process import RunSummary, log_ready, worker_identity
from awa_django.worker.reporter import InstanceReporter

logger = logging.getLogger(__name__)

_utcnow = partial(datetime.now, UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class MaintenanceProcessConfig:
    """Everything an ``awa_maintenance`` process needs, resolved from settings."""

    database_alias: str
    maintenance: MaintenanceConfig
    promoter: PromoterConfig
    retry_policy: RetryPolicy
    declared: Declarations
    runtime_snapshot_interval_s: float
    session: bool = True  # AWA["WORKER_SESSION"]

    @classmethod
    def from_settings(cls, conf: AwaSettings) -> MaintenanceProcessConfig:
        return cls(
            database_alias=conf.WORKER_DATABASE or conf.DATABASE_ALIAS,
            maintenance=MaintenanceConfig.from_settings(conf),
            promoter=PromoterConfig.from_settings(conf),
            retry_policy=RetryPolicy.from_settings(conf),
            declared=declared(conf, registry.jobs()),
            runtime_snapshot_interval_s=conf.RUNTIME_SNAPSHOT_INTERVAL_S,
            session=conf.WORKER_SESSION,
        )


class MaintenanceProcess:
    """Competes for leadership and maintains while leading, until told to stop."""

    def __init__(self, config: MaintenanceProcessConfig) -> None:
        self.config = config
        self.identity = worker_identity()
        self.stopping = asyncio.Event()
        self._maintainer: Maintainer | None = None

    def request_stop(self) -> None:
        self.stopping.set()

    def _snapshot_state(self) -> tuple[int, bool, bool, bool]:
        leading = self._maintainer is not None and self._maintainer.is_leader
        return 0, leading, True, self.stopping.is_set()

    async def run(self) -> RunSummary:
        config = self.config
        schedules = declared_schedule_rows()
        # Two connections, as a worker's: one for the maintenance passes, one session.
        pool = await connections.open_pool(
            config.database_alias, max_size=1, prepare=config.session
        )
        session = (
            SharedSession(lambda: connections.connect(config.database_alias))
            if config.session
            else None
        )
        await publish_schedules(pool, schedules)
        promoter = Promoter(pool, config.promoter)
        maintainer = self._maintainer = Maintainer(
            pool,
            config.maintenance,
            session=session,
            instance_id=self.identity,
            promoter=promoter,
            policy=config.retry_policy,
            now=_utcnow,
        )
        reporter = InstanceReporter(
            pool,
            instance_id=self.identity,
            queues={},
            declared=config.declared,
            interval_s=config.runtime_snapshot_interval_s,
            started_at=_utcnow(),
            state=self._snapshot_state,
        )
        await reporter.report_once()
        background = maintainer.start(self.stopping)
        background.append(
            asyncio.create_task(
                reporter.run(self.stopping, self.stopping, maintainer.leadership_changed),
                name="awa-reporter",
            )
        )
        log_ready(logger, self.identity, {}, maintenance=True, burst=False)
        try:
            await self.stopping.wait()
        finally:
            # Each loop finishes its current pass; the elector releases the lock.
            self.stopping.set()
            await asyncio.gather(*background, return_exceptions=True)
            if session is not None:
                await session.close()
            await reporter.withdraw()
            await pool.close()
            # Async signal receivers reach the ORM on asgiref's thread; its connection goes too.
            await sync_to_async(db_connections.close_all)()
        summary = RunSummary(claimed=0, stale=0, abandoned=0)
        summary.log(logger)
        return summary
