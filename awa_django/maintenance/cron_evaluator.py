"""Cron evaluation (leader task): enqueue the ticks each schedule owes, each exactly once.

A pass reads the unpaused schedules and the database clock, computes each schedule's due ticks
with croniter (from its last fire, its creation or its resume, whichever is latest), and fires
them through ``awa.fire_cron``: a compare-and-swap on ``last_fire_at`` that enqueues the jobs in
the same transaction. Two leaders (a deposed one still finishing its pass, and its successor)
that read the same row both try the same swap; the row lock orders them and the second finds
``last_fire_at`` moved, so it enqueues nothing. A pause that lands after the read wins the same
way. Missed ticks: "coalesce" fires only the newest one, "catch_up" each of them, oldest first,
at most ``max_catch_up`` (older ones are skipped with a warning). Each pass that fires logs one
line naming every schedule it fired, its ticks and its jobs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from psycopg_pool import AsyncConnectionPool

from awa_django import signals
from awa_django.conf import AwaSettings
from awa_django.declarations.cron_expression import CronExpression
from awa_django.declarations.jobs import DeclaredJob
from awa_django.exceptions import InvalidSchedule
from awa_django.maintenance.service import PoolTask, TaskConfig, counted
from awa_django.storage.cron import DUE_CRON_JOBS, DueSchedule, fire_cron
from awa_django.storage.statement import run_async
from awa_django.telemetry import get_telemetry

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class CronConfig(TaskConfig):
    max_catch_up: int

    @classmethod
    def from_settings(cls, conf: AwaSettings) -> CronConfig:
        return cls(interval_s=conf.CRON_INTERVAL_S, max_catch_up=conf.CRON_MAX_CATCH_UP)


@dataclass(frozen=True, slots=True, kw_only=True)
class FiredSchedule:
    """One schedule's fire: the ticks it owed (ISO 8601) and the jobs enqueued for them, none
    when another writer moved the schedule first."""

    name: str
    ticks: tuple[str, ...]
    job_ids: tuple[int, ...]

    def describe(self) -> str:
        ticks = self.ticks[0] if len(self.ticks) == 1 else f"{len(self.ticks)} ticks"
        if not self.job_ids:
            return f"{self.name} for {ticks} already fired by another leader"
        jobs = ", ".join(map(str, self.job_ids[:JOB_IDS_SHOWN]))
        if len(self.job_ids) > JOB_IDS_SHOWN:
            jobs += f" and {len(self.job_ids) - JOB_IDS_SHOWN} more"
        return f"{self.name} for {ticks} ({'job' if len(self.job_ids) == 1 else 'jobs'} {jobs})"


# Job ids a fire's description names; the line's ``fires`` field has them all.
JOB_IDS_SHOWN: Final = 5


@dataclass(frozen=True, slots=True)
class CronResult:
    # Jobs enqueued, schedules fired, and fires that lost their swap to another writer.
    enqueued: int
    fired: int
    lost: int
    fires: tuple[FiredSchedule, ...] = ()

    @property
    def changed(self) -> bool:
        return self.enqueued > 0

    def describe(self) -> str:
        if not self.fires:
            return "no schedule due"
        done = [f.describe() for f in self.fires if f.job_ids]
        lost = [f.describe() for f in self.fires if not f.job_ids]
        text = f"fired {counted(len(done), 'schedule')}: {'; '.join(done)}" if done else ""
        return "; ".join(part for part in (text, *lost) if part)


def due_ticks(schedule: DueSchedule, *, max_catch_up: int) -> list[datetime]:
    """The ticks ``schedule`` owes at ``schedule.db_now``, oldest first (pure: no I/O)."""
    expression = CronExpression(schedule.cron_expr, schedule.timezone)
    starts = [schedule.last_fire_at or schedule.created_at, schedule.resumed_at]
    after = max(start for start in starts if start is not None)
    if schedule.missed_fire_policy != "catch_up":
        return expression.ticks_between(after, schedule.db_now, limit=1)
    ticks = expression.ticks_between(after, schedule.db_now, limit=max_catch_up + 1)
    if len(ticks) > max_catch_up:
        logger.warning(
            "cron catch-up capped name=%s skipped_before=%s max_catch_up=%s",
            schedule.name,
            ticks[1].isoformat(),
            max_catch_up,
        )
        ticks = ticks[1:]
    return ticks


class CronEvaluator(PoolTask[CronConfig]):
    name = "cron"

    def __init__(self, pool: AsyncConnectionPool[Any], config: CronConfig) -> None:
        super().__init__(pool, config)
        # Schedules already reported as unusable, so a bad row is logged once, not every pass.
        self._reported: set[tuple[str, str, str]] = set()

    async def read_due(self) -> list[DueSchedule]:
        async with self._pool.connection() as conn:
            return await run_async(conn, DUE_CRON_JOBS)

    async def fire(self, schedule: DueSchedule) -> FiredSchedule | None:
        """Fire what ``schedule`` (as read) owes; None when nothing was due."""
        try:
            ticks = due_ticks(schedule, max_catch_up=self._config.max_catch_up)
        except InvalidSchedule as exc:
            # Written by a deployment whose croniter accepts what ours does not: leave it to them.
            version = (schedule.name, schedule.cron_expr, schedule.timezone)
            if version not in self._reported:
                self._reported.add(version)
                logger.error(
                    "cron schedule cannot be evaluated name=%s error=%s", schedule.name, exc
                )
            return None
        if not ticks:
            return None
        async with self._pool.connection() as conn:
            fired = await run_async(
                conn,
                fire_cron(
                    name=schedule.name,
                    expected_last=schedule.last_fire_at,
                    expected_resumed=schedule.resumed_at,
                    ticks=ticks,
                ),
            )
        owed = tuple(tick.isoformat() for tick in ticks)
        if fired is None:
            return FiredSchedule(name=schedule.name, ticks=owed, job_ids=())
        # The fire is committed (autocommit), so the jobs are announced as any enqueue's are.
        get_telemetry().enqueued(kind=fired.kind, queue=fired.queue, count=len(fired.job_ids))
        if signals.job_enqueued.has_listeners():
            await signals.send_robust(
                signals.job_enqueued,
                sender=DeclaredJob,
                job_ids=fired.job_ids,
                kind=fired.kind,
                queue=fired.queue,
            )
        return FiredSchedule(name=schedule.name, ticks=owed, job_ids=tuple(fired.job_ids))

    async def run_once(self) -> CronResult:
        fires: list[FiredSchedule] = []
        for schedule in await self.read_due():
            fire = await self.fire(schedule)
            if fire is not None:
                fires.append(fire)
        done = [fire for fire in fires if fire.job_ids]
        return CronResult(
            enqueued=sum(len(fire.job_ids) for fire in done),
            fired=len(done),
            lost=len(fires) - len(done),
            fires=tuple(fires),
        )
