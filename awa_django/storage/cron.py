"""Control plane, cron: syncing declared schedules, the leader's fire, operator actions. Every
function builds a ``Statement``; callers run it on their connection."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from awa_django.declarations.cron import ScheduleFields
from awa_django.declarations.exact_json import exact_text
from awa_django.sql import queries
from awa_django.storage.statement import Statement, all_rows, any_row, rows_of

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
class CronJobRecord(ScheduleFields):
    """A schedule as stored. ``last_fire_at`` is the newest tick enqueued by the timetable."""

    tags: list[str]
    metadata: dict[str, Any]
    missed_fire_policy: str
    last_fire_at: datetime | None
    paused_at: datetime | None
    paused_by: str | None
    resumed_at: datetime | None
    created_at: datetime
    updated_at: datetime


def sync_cron_jobs(rows: Sequence[dict[str, Any]]) -> Statement[int]:
    """Upsert declared schedules (never deletes one); answers how many rows were written."""
    params = {"schedules": Jsonb(list(rows), dumps=exact_text)}
    return Statement(sql=_SQL["sync_cron_jobs"], params=params, read=len)


DUE_CRON_JOBS: Statement[list[DueSchedule]] = Statement(
    sql=_SQL["due_cron_jobs"], read=all_rows, rows=rows_of(DueSchedule)
)


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


def fire_cron(
    *,
    name: str,
    expected_last: datetime | None,
    expected_resumed: datetime | None,
    ticks: Sequence[datetime],
) -> Statement[ScheduledJobs | None]:
    """Enqueue ``ticks`` of a schedule if it still stands as read; None when another fire, a
    pause or a resume got there first."""
    params = {
        "name": name,
        "expected_last": expected_last,
        "expected_resumed": expected_resumed,
        "ticks": list(ticks),
    }
    return Statement(sql=_SQL["fire_cron"], params=params, read=ScheduledJobs.of_rows)


LIST_CRON_JOBS: Statement[list[CronJobRecord]] = Statement(
    sql=_SQL["list_cron_jobs"],
    read=all_rows,
    rows=rows_of(CronJobRecord),
    json=("args", "metadata"),
)


def pause_cron_job(*, name: str, paused_by: str) -> Statement[bool]:
    params = {"name": name, "paused_by": paused_by}
    return Statement(sql=_SQL["pause_cron_job"], params=params, read=any_row)


def resume_cron_job(*, name: str) -> Statement[bool]:
    return Statement(sql=_SQL["resume_cron_job"], params={"name": name}, read=any_row)


def remove_cron_job(*, name: str) -> Statement[bool]:
    return Statement(sql=_SQL["remove_cron_job"], params={"name": name}, read=any_row)


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


def _fires(rows: list[Any]) -> list[CronFire]:
    return [CronFire(**dict(zip(_FIRE_COLUMNS, row, strict=True))) for row in rows]


def recent_cron_fires(*, per_schedule: int) -> Statement[list[CronFire]]:
    """The newest ``per_schedule`` fires of every schedule, by name, newest first."""
    params = {"per_schedule": per_schedule}
    return Statement(sql=_SQL["recent_cron_fires"], params=params, read=_fires)


_FIRE_COLUMNS = ("name", "job_id", "tick", "fired_at", "state", "finalized_at")


def trigger_cron_job(*, name: str) -> Statement[ScheduledJobs | None]:
    params = {"name": name}
    return Statement(sql=_SQL["trigger_cron_job"], params=params, read=ScheduledJobs.of_rows)
