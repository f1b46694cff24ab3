"""Periodic jobs: ``awa.periodic`` declares them, ``awa.cron`` manages the stored schedules.

``awa.cron.list()``, ``pause(name)``, ``resume(name)``, ``trigger(name)``, ``remove(name)``,
``recent_fires()``;
see docs/scheduling.md. ``periodic`` lives with the producer because a plain function under it
is declared with ``@awa.job``, which gives the job its enqueue methods.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from awa_django.declarations.cron import Declaration, MissedFirePolicy, Schedule, declarations
from awa_django.declarations.jobs import DeclaredJob
from awa_django.ops.cron import list_schedules as list
from awa_django.ops.cron import pause, recent_fires, remove, resume, trigger
from awa_django.producer.enqueue import job
from awa_django.storage.cron import CronFire, CronJobRecord

__all__ = [
    "CronFire",
    "CronJobRecord",
    "Schedule",
    "list",
    "pause",
    "periodic",
    "recent_fires",
    "remove",
    "resume",
    "trigger",
]


def periodic(
    schedule: str,
    *,
    name: str | None = None,
    timezone: str = "UTC",
    args: Mapping[str, Any] | None = None,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    tags: Sequence[str] | None = None,
    metadata: Mapping[str, Any] | None = None,
    missed: MissedFirePolicy = "coalesce",
) -> Callable[[Any], DeclaredJob[Any, Any]]:
    """Run a job on a cron schedule: ``@awa.periodic("*/5 * * * *")`` above ``@awa.job`` (or
    above a plain function, which it registers as a job with default options).

    ``name`` (default: the job's kind) identifies the schedule across deployments; ``args``
    are the job's arguments for every run; ``queue``, ``priority`` and ``max_attempts`` default
    to the job's. ``missed`` says what happens to ticks missed while no leader ran: "coalesce"
    enqueues one job for the newest of them, "catch_up" one per tick (at most
    ``AWA["CRON_MAX_CATCH_UP"]``).
    """

    def decorate(target: DeclaredJob[Any, Any] | Callable[..., Any]) -> DeclaredJob[Any, Any]:
        registered = target if isinstance(target, DeclaredJob) else job(target)
        declarations.add(
            Declaration(
                origin=f"@awa.periodic on {registered.__module__}.{registered.__qualname__}",
                name=name,
                schedule=schedule,
                job=registered,
                args=args,
                timezone=timezone,
                queue=queue,
                priority=priority,
                max_attempts=max_attempts,
                tags=tags,
                metadata=metadata,
                missed=missed,
            )
        )
        return registered

    return decorate
