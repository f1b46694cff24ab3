"""Operator actions on stored schedules, from code, the shell or ``manage.py awa_cron``.

They work on the ``awa.cron_jobs`` table, so they see every deployment's schedules, not only
the ones this process declares. Each runs in the caller's transaction when there is one.
"""

from __future__ import annotations

from collections import defaultdict

from django.db import connections, transaction
from django.db.backends.utils import CursorWrapper

from awa_django.conf import get_settings
from awa_django.core.enqueued import announce_enqueued
from awa_django.storage.cron import (
    LIST_CRON_JOBS,
    CronFire,
    CronJobRecord,
    pause_cron_job,
    recent_cron_fires,
    remove_cron_job,
    resume_cron_job,
    trigger_cron_job,
)
from awa_django.storage.statement import run

# How many fires of each schedule awa.fire_cron keeps (sql/functions/cron.sql).
FIRES_KEPT = 50


def _cursor(database: str | None) -> CursorWrapper:
    return connections[get_settings().operator_database(database)].cursor()


def list_schedules(*, database: str | None = None) -> list[CronJobRecord]:
    """Every schedule stored in ``database``, by name. A schedule lives in its queue's
    database; every call here takes ``database=`` (default ``AWA["DATABASE_ALIAS"]``)."""
    with _cursor(database) as cursor:
        return run(cursor, LIST_CRON_JOBS)


def recent_fires(
    per_schedule: int = 10, *, database: str | None = None
) -> dict[str, list[CronFire]]:
    """The newest ``per_schedule`` (1..50) jobs each schedule's fires and triggers enqueued,
    newest first, with their jobs' states; schedules that never fired are left out."""
    if isinstance(per_schedule, bool) or not isinstance(per_schedule, int):
        raise TypeError(f"per_schedule must be an integer, got {per_schedule!r}")
    if not 1 <= per_schedule <= FIRES_KEPT:
        raise ValueError(f"per_schedule must be 1..{FIRES_KEPT}, got {per_schedule}")
    fires: defaultdict[str, list[CronFire]] = defaultdict(list)
    with _cursor(database) as cursor:
        for fire in run(cursor, recent_cron_fires(per_schedule=per_schedule)):
            fires[fire.name].append(fire)
    return dict(fires)


def pause(name: str, *, by: str = "operator", database: str | None = None) -> bool:
    """Stop a schedule from firing; False when it does not exist or is already paused.

    It wins against a leader evaluating the schedule at the same moment: that fire either
    committed before the pause, or finds the schedule paused and enqueues nothing.
    """
    with _cursor(database) as cursor:
        return run(cursor, pause_cron_job(name=name, paused_by=by))


def resume(name: str, *, database: str | None = None) -> bool:
    """Let a paused schedule fire again, from its next tick on: ticks that fell inside the pause
    are skipped, whatever its missed-fire policy. False when it was not paused."""
    with _cursor(database) as cursor:
        return run(cursor, resume_cron_job(name=name))


def trigger(name: str, *, database: str | None = None) -> int | None:
    """Enqueue the schedule's job now, outside its timetable; returns the job id, or None when
    no schedule has that name. The timetable is unaffected."""
    alias = get_settings().operator_database(database)
    with transaction.atomic(using=alias), _cursor(alias) as cursor:
        triggered = run(cursor, trigger_cron_job(name=name))
        if triggered is None:
            return None
        announce_enqueued(alias, triggered.job_ids, kind=triggered.kind, queue=triggered.queue)
    return triggered.job_ids[0]


def remove(name: str, *, database: str | None = None) -> bool:
    """Delete a stored schedule; False when there was none. A deployment that still declares it
    re-creates it when its next worker starts: remove the declaration first."""
    with _cursor(database) as cursor:
        return run(cursor, remove_cron_job(name=name))
