"""Queue health and control, for operators: ``awa.queues.stats()``, ``history()``,
``pause()``, ``resume()``, ``drain()``, ``set_concurrency()`` and ``reset_concurrency()``.

Live depths come from one indexed statement over the queue plane (the same one the leader's
gauges use); completed and failed counts and throughput come from the samples the maintenance
leader stores every ``QUEUE_STATS_INTERVAL_S`` — there is no per-job counter row — plus the
closures since its newest sample, read from the ring, so they count from the first job on,
with or without a leader.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.db import connections, transaction

from awa_django.conf import get_settings
from awa_django.exceptions import ConfirmationRequired, InvalidJob
from awa_django.limits import concurrency_problem
from awa_django.ops.known import queue_known, unknown_queue_message
from awa_django.storage import control, samples
from awa_django.storage.backlog import KINDS_NOBODY_RUNS
from awa_django.storage.browse import without_jit
from awa_django.storage.queue import QueueDepth, queue_depths
from awa_django.storage.samples import QueueRollup, QueueSample
from awa_django.storage.statement import run, run_read

__all__ = [
    "QueueRollup",
    "QueueSample",
    "QueueStats",
    "drain",
    "history",
    "pause",
    "reset_concurrency",
    "resume",
    "rollups",
    "set_concurrency",
    "stats",
]

HOUR_S: Final = 3600.0
THROUGHPUT_WINDOW_MIN: Final = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueStats:
    """One queue's health. Depths are live; ``completed_last_hour``, ``failed_last_hour`` and
    ``throughput_per_min`` (completions per minute over the last five minutes) come from the
    leader's samples."""

    queue: str
    # The DATABASES alias holding the queue (its "database", AWA["DATABASE_ALIAS"] by default).
    database: str
    # Declared in this process's AWA["QUEUES"] (a queue only seen in the database is not).
    declared: bool
    available: int
    scheduled: int
    retryable: int
    running: int
    waiting_external: int
    dlq: int
    # Seconds since the run_at of the oldest available job; 0 when none waits.
    lag_s: float
    completed_last_hour: int
    failed_last_hour: int
    throughput_per_min: float
    paused: bool
    paused_at: datetime | None
    paused_by: str | None
    dlq_enabled: bool
    # Retryable jobs that wait for a worker that knows their kind, per kind: the workers that
    # claimed them had no handler for it (docs/operations.md#jobs-no-worker-knows).
    unknown_kinds: Mapping[str, int]
    # The concurrency an operator set live (set_concurrency), which every worker serving the
    # queue uses instead of its configured value; None: the configured value.
    concurrency: int | None = None
    concurrency_set_at: datetime | None = None
    concurrency_set_by: str | None = None

    @property
    def pending(self) -> int:
        """Jobs that have not started: available, scheduled and retryable."""
        return self.available + self.scheduled + self.retryable


def with_unsampled(
    sampled: Mapping[str, tuple[int, int, int]], unsampled: Mapping[str, tuple[int, int, int]]
) -> dict[str, tuple[int, int, int]]:
    """(completed, failed, completed in the last 5 minutes) per queue, the samples' and the
    closures since the newest sample added up."""
    totals = dict(sampled)
    for name, (completed, failed, completed_5m) in unsampled.items():
        before = totals.get(name, (0, 0, 0))
        totals[name] = (before[0] + completed, before[1] + failed, before[2] + completed_5m)
    return totals


def stats(*, database: str | None = None) -> list[QueueStats]:
    """Every declared queue, and any other queue the database knows, by database then name:
    every database holding queues, or ``database`` alone. A declared queue is listed in its
    own database (and in another only if that one holds rows of it)."""
    conf = get_settings()
    found: list[QueueStats] = []
    for alias in conf.operator_databases(database):
        found += _stats(alias)
    return found


def _stats(alias: str) -> list[QueueStats]:
    conf = get_settings()
    with connections[alias].cursor() as cursor:
        depths = {d.queue: d for d in run_read(cursor, without_jit(queue_depths()))}
        totals = with_unsampled(
            run(cursor, samples.sample_totals(window_s=HOUR_S)),
            run(cursor, samples.unsampled_closures(window_s=HOUR_S)),
        )
        meta = run(cursor, samples.meta_rows())
        unknown = run(cursor, KINDS_NOBODY_RUNS)
    own = {name for name in conf.QUEUES if conf.queue_database(name) == alias}
    names = sorted(own | set(depths) | set(meta) | set(totals))
    return [
        queue_stats(name, alias, depths.get(name), totals.get(name), meta.get(name), unknown)
        for name in names
    ]


def queue_stats(
    name: str,
    alias: str,
    depth: QueueDepth | None,
    totals: tuple[int, int, int] | None,
    control: Mapping[str, Any] | None,
    unknown_kinds: Mapping[str, Mapping[str, int]],
) -> QueueStats:
    """One queue's health from its depths (live, or the leader's latest sample), its
    (completed, failed, completed in the last 5 minutes), its control row and the jobs of kinds
    no worker runs; what is missing counts as none."""
    depth = depth or _NO_DEPTH
    completed, failed, completed_5m = totals or (0, 0, 0)
    control = control or {}
    return QueueStats(
        queue=name,
        database=alias,
        declared=name in get_settings().QUEUES,
        available=depth.available,
        scheduled=depth.scheduled,
        retryable=depth.retryable,
        running=depth.running,
        waiting_external=depth.waiting_external,
        dlq=depth.dlq,
        lag_s=depth.lag_s,
        completed_last_hour=completed,
        failed_last_hour=failed,
        throughput_per_min=completed_5m / THROUGHPUT_WINDOW_MIN,
        paused=bool(control.get("paused", False)),
        paused_at=control.get("paused_at"),
        paused_by=control.get("paused_by"),
        dlq_enabled=bool(control.get("dlq_enabled", False)),
        unknown_kinds=unknown_kinds.get(name, {}),
        concurrency=control.get("concurrency"),
        concurrency_set_at=control.get("concurrency_set_at"),
        concurrency_set_by=control.get("concurrency_set_by"),
    )


_NO_DEPTH: Final = QueueDepth(queue="", available=0, scheduled=0, retryable=0, running=0, lag_s=0.0)


def history(
    queue: str | None = None, *, window_s: float = HOUR_S, database: str | None = None
) -> list[QueueSample]:
    """The leader's samples of the last ``window_s`` (one queue, or all), oldest first: the
    series behind a depth and throughput chart. ``database``: the alias whose leader sampled
    them (default: ``queue``'s database, else ``AWA["DATABASE_ALIAS"]``)."""
    alias = get_settings().operator_database(database, queue=queue)
    with connections[alias].cursor() as cursor:
        return run(cursor, samples.samples(queue=queue, window_s=window_s))


# The compacted history's resolutions (seconds): 1-minute buckets kept 25 hours, 15-minute ones
# kept 8 days (maintenance.queue_stats).
MINUTE: Final = 60
QUARTER_HOUR: Final = 900


def rollups(
    *,
    resolution_s: int = MINUTE,
    window_s: float = 24 * HOUR_S,
    per_kind: bool = False,
    database: str | None = None,
) -> list[QueueRollup]:
    """The leader's compacted history over the last ``window_s``, oldest first: 1-minute
    (``MINUTE``) or 15-minute (``QUARTER_HOUR``) buckets per queue, or per queue and kind
    (``per_kind``): what a 24-hour or 7-day chart is drawn from; ``database``: the alias to
    read (default ``AWA["DATABASE_ALIAS"]``)."""
    if resolution_s not in (MINUTE, QUARTER_HOUR):
        raise ValueError(f"resolution_s must be {MINUTE} or {QUARTER_HOUR}, got {resolution_s!r}")
    alias = get_settings().operator_database(database)
    with connections[alias].cursor() as cursor:
        return run(
            cursor,
            samples.rollups(resolution_s=resolution_s, window_s=window_s, per_queue=not per_kind),
        )


def _known(queue: str, database: str | None) -> str:
    """The alias holding ``queue`` (``database``, else the queue's own), once it is known there.
    Not only declared queues: one another service declares, or one removed from the settings
    while it holds jobs, must stay pausable and drainable."""
    alias = get_settings().operator_database(database, queue=queue)
    if not queue_known(queue, database=alias):
        raise InvalidJob(unknown_queue_message(queue), field="queue")
    return alias


def pause(queue: str, *, by: str = "operator", database: str | None = None) -> None:
    """Pause ``queue``: workers claim nothing from it and promotion leaves its due jobs in the
    backlog until it is resumed. Enqueueing still works; running jobs finish. Every call here
    acts on ``database`` when given, else on the queue's own database."""
    alias = _known(queue, database)
    with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
        run(cursor, control.pause(queue=queue, by=by))


def resume(queue: str, *, database: str | None = None) -> None:
    """Resume ``queue`` and wake its workers (no-op when it is not paused)."""
    alias = _known(queue, database)
    with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
        run(cursor, control.resume(queue=queue))


def drain(
    queue: str,
    *,
    confirm: bool = False,
    reason: str = "drained by operator",
    database: str | None = None,
) -> int:
    """Cancel every pending job of ``queue`` (available, scheduled, retryable) and return how
    many; running jobs are left to finish. Irreversible, so ``confirm=True`` is required
    (``ConfirmationRequired`` otherwise). Pause the queue first to stop new work being
    claimed meanwhile; jobs enqueued after the drain are kept."""
    alias = _known(queue, database)
    if not confirm:
        raise ConfirmationRequired(
            f"draining {queue!r} cancels its pending jobs: pass confirm=True"
        )
    with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
        return run(cursor, control.drain(queue=queue, reason=reason))


def set_concurrency(
    queue: str, concurrency: int, *, by: str = "operator", database: str | None = None
) -> None:
    """Run at most ``concurrency`` jobs of ``queue`` at once in each worker process serving it,
    from now on and without a restart, instead of the configured value (1 to
    ``MAX_LIVE_CONCURRENCY``; ``InvalidJob`` naming ``concurrency`` otherwise). Workers are
    told at commit and apply it within moments; lowering it lets running jobs finish and
    starts new ones only below the new value. Stays until ``reset_concurrency``."""
    problem = concurrency_problem(concurrency)
    if problem is not None:
        raise InvalidJob(f"concurrency {problem}", field="concurrency")
    _set(queue, concurrency, by=by, database=database)


def reset_concurrency(queue: str, *, by: str = "operator", database: str | None = None) -> None:
    """Put ``queue`` back on each worker's configured concurrency."""
    _set(queue, None, by=by, database=database)


def _set(queue: str, concurrency: int | None, *, by: str, database: str | None) -> None:
    alias = _known(queue, database)
    with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
        run(cursor, control.set_concurrency(queue=queue, concurrency=concurrency, by=by))
