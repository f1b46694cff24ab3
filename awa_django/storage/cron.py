"""Control plane, cron: syncing declared schedules, the leader's fire, operator actions."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.backends.utils import CursorWrapper
from psycopg import AsyncConnection
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from awa_django.declarations.exact_json import exact_text
from awa_django.sql import queries

_SQL = queries("cron")


@dataclass(frozen=True, slots=True, kw_only=True)
class DueSchedule:
    """What the leader reads to compute a schedule's due ticks; ``db_now`` is the server clock."""

    name: str
    cron_expr: str
    timezone: str
    missed_fire_policy: str
    last_fire_at: datetime | None
    resumed_at: datetime | None
    created_at: datetime
    db_now: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class CronJobRecord:
    """A schedule as stored. ``last_fire_at`` is the newest tick enqueued by the timetable."""

    name: str
    cron_expr: str
    timezone: str
    kind: str
    queue: str
    args: dict[str, Any]
    priority: int
    max_attempts: int
    tags: list[str]
    metadata: dict[str, Any]
    missed_fire_policy: str
    last_fire_at: datetime | None
    paused_at: datetime | None
    paused_by: str | None
    resumed_at: datetime | None
    created_at: datetime
    updated_at: datetime


async def sync_cron_jobs(conn: AsyncConnection[Any], rows: Sequence[dict[str, Any]]) -> int:
    """Upsert declared schedules (never deletes one); returns how many rows were written."""
    cursor = await conn.execute(
        _SQL["sync_cron_jobs"], {"schedules": Jsonb(list(rows), dumps=exact_text)}
    )
    return cursor.rowcount


async def due_cron_jobs(conn: AsyncConnection[Any]) -> list[DueSchedule]:
    async with conn.cursor(row_factory=class_row(DueSchedule)) as cursor:
        await cursor.execute(_SQL["due_cron_jobs"])
        return await cursor.fetchall()


@dataclass(frozen=True, slots=True)
class ScheduledJobs:
    """The jobs one fire or trigger of a schedule enqueued, all of one kind and queue."""

    job_ids: list[int]
    kind: str
    queue: str

    @classmethod
    def of_rows(cls, rows: Sequence[tuple[Any, ...]]) -> ScheduledJobs | None:
        """From ``(job_id, kind, queue)`` rows; None when there are none."""
        if not rows:
            return None
        _, kind, queue = rows[0]
        return cls([int(row[0]) for row in rows], kind, queue)


async def fire_cron(
    conn: AsyncConnection[Any],
    *,
    name: str,
    expected_last: datetime | None,
    expected_resumed: datetime | None,
    ticks: Sequence[datetime],
) -> ScheduledJobs | None:
    """Enqueue ``ticks`` of a schedule if it still stands as read; None when another fire, a
    pause or a resume got there first."""
    cursor = await conn.execute(
        _SQL["fire_cron"],
        {
            "name": name,
            "expected_last": expected_last,
            "expected_resumed": expected_resumed,
            "ticks": list(ticks),
        },
    )
    return ScheduledJobs.of_rows(await cursor.fetchall())


def list_cron_jobs(cursor: CursorWrapper) -> list[CronJobRecord]:
    cursor.execute(_SQL["list_cron_jobs"])
    names = [col.name for col in cursor.description]
    records = []
    for row in cursor.fetchall():
        values = dict(zip(names, row, strict=True))
        # Django's connection hands jsonb back as text.
        for column in ("args", "metadata"):
            if isinstance(values[column], str):
                values[column] = json.loads(values[column])
        records.append(CronJobRecord(**values))
    return records


def _returns_row(cursor: CursorWrapper, block: str, params: dict[str, Any]) -> bool:
    cursor.execute(_SQL[block], params)
    return cursor.fetchone() is not None


def pause_cron_job(cursor: CursorWrapper, *, name: str, paused_by: str) -> bool:
    return _returns_row(cursor, "pause_cron_job", {"name": name, "paused_by": paused_by})


def resume_cron_job(cursor: CursorWrapper, *, name: str) -> bool:
    return _returns_row(cursor, "resume_cron_job", {"name": name})


def remove_cron_job(cursor: CursorWrapper, *, name: str) -> bool:
    return _returns_row(cursor, "remove_cron_job", {"name": name})


@dataclass(frozen=True, slots=True, kw_only=True)
class CronFire:
    """One job a schedule's fire (or a trigger: ``tick`` None) enqueued, and where it stands:
    its state, None once retention has pruned it."""

    name: str
    job_id: int
    tick: datetime | None
    fired_at: datetime
    state: str | None
    finalized_at: datetime | None


def recent_cron_fires(cursor: CursorWrapper, *, per_schedule: int) -> list[CronFire]:
    """The newest ``per_schedule`` fires of every schedule, by name, newest first."""
    cursor.execute(_SQL["recent_cron_fires"], {"per_schedule": per_schedule})
    return [CronFire(**dict(zip(_FIRE_COLUMNS, row, strict=True))) for row in cursor.fetchall()]


_FIRE_COLUMNS = ("name", "job_id", "tick", "fired_at", "state", "finalized_at")


def trigger_cron_job(cursor: CursorWrapper, *, name: str) -> ScheduledJobs | None:
    cursor.execute(_SQL["trigger_cron_job"], {"name": name})
    return ScheduledJobs.of_rows(cursor.fetchall())
