"""Runtime instances: one row per running worker (or ``awa_maintenance``) process, rewritten
every ``RUNTIME_SNAPSHOT_INTERVAL_S``. ``awa.runtimes.list()`` shows them all, ``leader()`` the
live maintenance leader. A row silent for ``RUNTIME_STALE_AFTER_S`` is not ``live`` and is
deleted by the leader; a process that stops cleanly deletes its own row."""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime

from django.db import connections

from awa_django.conf import get_settings
from awa_django.storage.runtime import list_runtimes
from awa_django.storage.statement import run

__all__ = ["RuntimeRecord", "leader", "list"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeRecord:
    """One process's latest snapshot."""

    instance_id: str
    hostname: str
    pid: int
    version: str
    started_at: datetime
    last_seen_at: datetime
    queues: dict[str, int]  # queue served -> concurrency
    in_flight: int
    is_leader: bool
    healthy: bool
    shutting_down: bool
    # Refreshed within RUNTIME_STALE_AFTER_S.
    live: bool


def list(*, database: str | None = None) -> builtins.list[RuntimeRecord]:
    """Every runtime row of ``database`` (default ``AWA["DATABASE_ALIAS"]``; each database
    holding queues has the runtimes of the processes serving it), newest start first."""
    conf = get_settings()
    with connections[conf.operator_database(database)].cursor() as cursor:
        rows = run(cursor, list_runtimes(stale_after_s=conf.RUNTIME_STALE_AFTER_S))
    return [RuntimeRecord(**row) for row in rows]


def leader(*, database: str | None = None) -> RuntimeRecord | None:
    """The live runtime that reports holding maintenance leadership of ``database`` (default
    ``AWA["DATABASE_ALIAS"]``; each database has its own leader), if any."""
    leaders = [r for r in list(database=database) if r.live and r.is_leader]
    return max(leaders, key=lambda r: r.last_seen_at) if leaders else None
