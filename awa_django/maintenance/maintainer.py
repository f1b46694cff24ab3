"""The maintenance leader of one process: the elector, and one loop per maintenance service
that runs while this process leads. ``awa_worker`` starts one beside its dispatchers (unless
``--no-maintenance``), ``awa_maintenance`` starts one on its own."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool

from awa_django.conf import AwaSettings
from awa_django.core.retry import RetryPolicy
from awa_django.core.session_tries import SessionTries
from awa_django.maintenance.cron_evaluator import CronConfig, CronEvaluator
from awa_django.maintenance.leader import LeaderElector, LeaseElector
from awa_django.maintenance.ledgers import LedgerCleaner, LedgerConfig
from awa_django.maintenance.promoter import Promoter
from awa_django.maintenance.queue_stats import QueueSampler, QueueStatsConfig
from awa_django.maintenance.rescuer import RescueConfig, Rescuer
from awa_django.maintenance.retention import RetentionCleaner, RetentionConfig
from awa_django.maintenance.rings import RingConfig, RingMaintainer
from awa_django.maintenance.runtime_cleanup import RuntimeCleaner, RuntimeCleanupConfig
from awa_django.maintenance.service import MaintenanceTask, run_task
from awa_django.maintenance.unique_sweeper import UniqueClaimSweeper, UniqueSweepConfig
from awa_django.storage.session import SharedSession


@dataclass(frozen=True, slots=True, kw_only=True)
class MaintenanceConfig:
    """What the maintenance leader runs, and how often: one config per service. The promoter's
    is not here: its service is passed in (see ``maintenance_services``)."""

    leader_interval_s: float
    rescue: RescueConfig
    rings: RingConfig
    retention: RetentionConfig
    instances: RuntimeCleanupConfig
    queue_stats: QueueStatsConfig
    cron: CronConfig
    unique_claims: UniqueSweepConfig
    ledgers: LedgerConfig

    @classmethod
    def from_settings(cls, conf: AwaSettings) -> MaintenanceConfig:
        return cls(
            leader_interval_s=conf.LEADER_ELECTION_INTERVAL_S,
            rescue=RescueConfig.from_settings(conf),
            rings=RingConfig.from_settings(conf),
            retention=RetentionConfig.from_settings(conf),
            instances=RuntimeCleanupConfig.from_settings(conf),
            queue_stats=QueueStatsConfig.from_settings(conf),
            cron=CronConfig.from_settings(conf),
            unique_claims=UniqueSweepConfig.from_settings(conf),
            ledgers=LedgerConfig.from_settings(conf),
        )


def maintenance_services(
    pool: AsyncConnectionPool[Any],
    config: MaintenanceConfig,
    *,
    promoter: Promoter,
    policy: RetryPolicy,
    now: Callable[[], datetime],
) -> list[MaintenanceTask]:
    """The services the elected leader runs. The promoter is passed in because a burst worker
    promotes with the same one while it decides whether it is done."""
    return [
        promoter,
        Rescuer(pool, config.rescue, policy=policy, now=now),
        RingMaintainer(pool, config.rings),
        RetentionCleaner(pool, config.retention),
        RuntimeCleaner(pool, config.instances),
        QueueSampler(pool, config.queue_stats),
        CronEvaluator(pool, config.cron),
        UniqueClaimSweeper(pool, config.unique_claims),
        LedgerCleaner(pool, config.ledgers),
    ]


class Maintainer:
    """Competes for leadership on the process's session connection and runs every service
    while leading; a service of the process root (``start``/``stop``, by shape)."""

    name = "maintainer"

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        config: MaintenanceConfig,
        *,
        session: SharedSession | None,
        instance_id: str,
        promoter: Promoter,
        policy: RetryPolicy,
        now: Callable[[], datetime],
        tries: SessionTries | None = None,
    ) -> None:
        # Without a session (AWA["WORKER_SESSION"] = False), a lease on this process's runtime
        # row instead of the session advisory lock.
        self._elector: LeaderElector | LeaseElector = (
            LeaderElector(session, retry_interval_s=config.leader_interval_s, tries=tries)
            if session is not None
            else LeaseElector(
                pool, instance_id=instance_id, retry_interval_s=config.leader_interval_s
            )
        )
        self._services = maintenance_services(
            pool, config, promoter=promoter, policy=policy, now=now
        )
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def is_leader(self) -> bool:
        return self._elector.is_leader

    @property
    def leadership_changed(self) -> asyncio.Event:
        """Set when this process gains or loses leadership; whoever reports it clears it."""
        return self._elector.changed

    async def start(self) -> None:
        """Start the elector's task and one loop per service."""
        stopping = self._stopping
        self._tasks = [asyncio.create_task(self._elector.run(stopping), name="awa-leader")]
        for service in self._services:
            self._tasks.append(
                asyncio.create_task(
                    run_task(service, is_leader=lambda: self._elector.is_leader, stopping=stopping),
                    name=f"awa-maintenance-{service.name}",
                )
            )

    async def stop(self) -> None:
        """Each loop finishes its current pass; the elector releases the lock on its way out."""
        self._stopping.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)
