"""Health checks for operators and probes: ``awa.health.check()`` and ``manage.py awa_health``.

Healthy means all of: the database answers; every migration is applied; a live runtime holds
maintenance leadership (so promotion, rescue, ring prune and retention run), or the fleet is
*starting*; and every queue in ``AWA["QUEUES"]`` is served by at least one live worker (a queue
nobody serves is *stale*: its jobs wait forever). "Live" means a runtime snapshot newer than
``RUNTIME_STALE_AFTER_S``.

Starting: no live runtime says it leads, but one that is not stopping started less than
``LEADER_ELECTION_INTERVAL_S + RUNTIME_SNAPSHOT_INTERVAL_S`` ago. A process writes its first
snapshot before it first tries for the lock, and one that leads says so at its next snapshot
(at once on this version, at its next interval on 0.1.0), so right after a deploy a healthy
fleet has no leader in its rows for a few seconds; a probe must not fail for that.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any

from django.db import DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from awa_django.conf import get_settings
from awa_django.ops import runtimes
from awa_django.storage.control import PING
from awa_django.storage.statement import run


@dataclass(frozen=True, slots=True)
class Check:
    """One health check: its name, whether it passed, and what it found."""

    name: str
    ok: bool
    detail: str


@dataclass(frozen=True, slots=True)
class HealthReport:
    checks: tuple[Check, ...]

    @property
    def healthy(self) -> bool:
        return all(c.ok for c in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {"healthy": self.healthy, "checks": [asdict(c) for c in self.checks]}


def _database(alias: str) -> Check:
    try:
        with connections[alias].cursor() as cursor:
            run(cursor, PING)
    except DatabaseError as exc:
        return Check("database", False, f"database {alias!r} unreachable: {exc}".strip())
    return Check("database", True, f"database {alias!r} answers")


def _migrations(alias: str) -> Check:
    executor = MigrationExecutor(connections[alias])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        pending = ", ".join(f"{m.app_label}.{m.name}" for m, _ in plan)
        return Check("migrations", False, f"unapplied migrations: {pending}")
    return Check("migrations", True, "all migrations applied")


def _leader(live: list[runtimes.RuntimeRecord], now: datetime) -> Check:
    leaders = [r for r in live if r.is_leader]
    if not leaders:
        conf = get_settings()
        window_s = conf.LEADER_ELECTION_INTERVAL_S + conf.RUNTIME_SNAPSHOT_INTERVAL_S
        starting = [
            r
            for r in live
            if not r.shutting_down and (now - r.started_at).total_seconds() < window_s
        ]
        if starting:
            newest = max(starting, key=lambda r: r.started_at)
            age_s = max((now - newest.started_at).total_seconds(), 0.0)
            return Check(
                "leader",
                True,
                f"starting: no leader elected yet; runtime {newest.instance_id} started "
                f"{age_s:.1f}s ago (a leader is expected within {window_s:g}s of a start)",
            )
        return Check(
            "leader",
            False,
            "no live runtime holds maintenance leadership: run awa_worker or awa_maintenance",
        )
    leader = max(leaders, key=lambda r: r.last_seen_at)
    return Check("leader", True, f"leader {leader.instance_id} (pid {leader.pid})")


def _queues(live: list[runtimes.RuntimeRecord], declared: set[str]) -> Check:
    served = {queue for r in live if not r.shutting_down for queue in r.queues}
    stale = sorted(declared - served)
    if stale:
        return Check("queues", False, f"no live worker serves: {', '.join(stale)}")
    return Check("queues", True, f"every declared queue is served ({len(served)} served)")


def check() -> HealthReport:
    """Run every check; later checks are skipped (failed) when the database is down. With
    queues in several databases (a queue's ``database``), every check runs on each, named
    with its alias: each has its own leader and the workers serving its queues."""
    conf = get_settings()
    if len(conf.databases) == 1:
        return HealthReport(_checks(conf.DATABASE_ALIAS, set(conf.QUEUES)))
    found: list[Check] = []
    for alias in conf.databases:
        declared = {name for name in conf.QUEUES if conf.queue_database(name) == alias}
        found += [replace(c, name=f"{c.name} ({alias})") for c in _checks(alias, declared)]
    return HealthReport(tuple(found))


def _checks(alias: str, declared: set[str]) -> tuple[Check, ...]:
    """The checks of one database, whose queues are ``declared``."""
    database = _database(alias)
    if not database.ok:
        skipped = [Check(n, False, "skipped: database unreachable") for n in ("migrations",)]
        return (database, *skipped)
    migrations = _migrations(alias)
    if not migrations.ok:
        return (database, migrations)
    live = [r for r in runtimes.list(database=alias) if r.live]
    return (database, migrations, _leader(live, timezone.now()), _queues(live, declared))
