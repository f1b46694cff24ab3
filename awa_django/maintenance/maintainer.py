"""The maintenance leader of one process: the elector, and one loop per maintenance service
that runs while this process leads. ``awa_worker`` starts one beside its dispatchers (unless
``--no-maintenance``), ``awa_maintenance`` starts one on its own."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from awa_django.conf import AwaSettings
from awa_django.maintenance.cron_evaluator import CronEvaluator
from awa_django.maintenance.leader import LeaderElector
from awa_django.maintenance.promoter import Promoter
from awa_django.maintenance.queue_stats import QueueStats
from awa_django.maintenance.rate_ledger import RateLedgerCleaner
from awa_django.maintenance.rescuer import Rescuer
from awa_django.maintenance.retention import RetentionCleaner
from awa_django.maintenance.rings import RingMaintainer
from awa_django.maintenance.runtime_cleanup import RuntimeCleaner
from awa_django.maintenance.service import MaintenanceTask, run_task
from awa_django.maintenance.unique_sweeper import UniqueClaimSweeper
from awa_django.worker.executor import RetryPolicy


@dataclass(frozen=True, slots=True, kw_only=True)
class MaintenanceConfig:
    """What the maintenance leader runs, and how often (units in the names)."""

    leader_interval_s: float
    rescue_interval_s: float
    staleness_s: float
    rescue_batch_size: int
    ring_interval_s: float
    ring_lock_timeout_ms: int
    completed_retention_s: float
    failed_retention_s: float
    dlq_retention_s: float
    cleanup_interval_s: float
    cleanup_batch_size: int
    queue_stats_interval_s: float
    cron_interval_s: float
    cron_max_catch_up: int
    rate_ledger_interval_s: float
    runtime_stale_after_s: float = 60.0

    @classmethod
    def from_settings(cls, conf: AwaSettings) -> MaintenanceConfig:
        return cls(
            leader_interval_s=conf.LEADER_ELECTION_INTERVAL_S,
            rescue_interval_s=conf.RESCUE_INTERVAL_S,
            staleness_s=conf.HEARTBEAT_STALENESS_S,
            rescue_batch_size=conf.RESCUE_BATCH_SIZE,
            ring_interval_s=conf.RING_INTERVAL_S,
            ring_lock_timeout_ms=conf.RING_LOCK_TIMEOUT_MS,
            completed_retention_s=conf.COMPLETED_RETENTION_S,
            failed_retention_s=conf.FAILED_RETENTION_S,
            dlq_retention_s=conf.DLQ_RETENTION_S,
            cleanup_interval_s=conf.CLEANUP_INTERVAL_S,
            cleanup_batch_size=conf.CLEANUP_BATCH_SIZE,
            queue_stats_interval_s=conf.QUEUE_STATS_INTERVAL_S,
            cron_interval_s=conf.CRON_INTERVAL_S,
            cron_max_catch_up=conf.CRON_MAX_CATCH_UP,
            rate_ledger_interval_s=conf.CLEANUP_INTERVAL_S,
            runtime_stale_after_s=conf.RUNTIME_STALE_AFTER_S,
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
    m = config
    return [
        promoter,
        Rescuer(
            pool,
            interval_s=m.rescue_interval_s,
            staleness_s=m.staleness_s,
            batch_size=m.rescue_batch_size,
            policy=policy,
            now=now,
        ),
        RingMaintainer(
            pool,
            interval_s=m.ring_interval_s,
            completed_retention_s=m.completed_retention_s,
            failed_retention_s=m.failed_retention_s,
            lock_timeout_ms=m.ring_lock_timeout_ms,
        ),
        RetentionCleaner(
            pool,
            interval_s=m.cleanup_interval_s,
            dlq_retention_s=m.dlq_retention_s,
            failed_retention_s=m.failed_retention_s,
            batch_size=m.cleanup_batch_size,
        ),
        RuntimeCleaner(
            pool, interval_s=m.cleanup_interval_s, stale_after_s=m.runtime_stale_after_s
        ),
        QueueStats(pool, interval_s=m.queue_stats_interval_s),
        CronEvaluator(pool, interval_s=m.cron_interval_s, max_catch_up=m.cron_max_catch_up),
        UniqueClaimSweeper(
            pool, interval_s=m.cleanup_interval_s, max_per_pass=10 * m.cleanup_batch_size
        ),
        RateLedgerCleaner(
            pool, interval_s=m.rate_ledger_interval_s, batch_size=m.cleanup_batch_size
        ),
    ]


class Maintainer:
    """Competes for leadership on its own connection and runs every service while leading."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        config: MaintenanceConfig,
        *,
        connect: Callable[[], Awaitable[AsyncConnection[Any]]],
        promoter: Promoter,
        policy: RetryPolicy,
        now: Callable[[], datetime],
    ) -> None:
        self._elector = LeaderElector(connect, retry_interval_s=config.leader_interval_s)
        self._services = maintenance_services(
            pool, config, promoter=promoter, policy=policy, now=now
        )

    @property
    def is_leader(self) -> bool:
        return self._elector.is_leader

    def start(self, stopping: asyncio.Event) -> list[asyncio.Task[None]]:
        """The elector's task and one loop per service; all end once ``stopping`` is set (the
        elector releases the lock on its way out)."""
        tasks = [asyncio.create_task(self._elector.run(stopping), name="awa-leader")]
        for service in self._services:
            tasks.append(
                asyncio.create_task(
                    run_task(service, is_leader=lambda: self._elector.is_leader, stopping=stopping),
                    name=f"awa-maintenance-{service.name}",
                )
            )
        return tasks
