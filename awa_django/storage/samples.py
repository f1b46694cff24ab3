"""Queue samples: the leader's per-queue samples and their rollups (written on the worker's
connection), and the reads ``awa.queues`` and the admin's queue health page are built from.

Every function builds a ``Statement`` (or an ``Atomic`` of statements that commit together);
callers run it on their connection (``statement.run`` / ``run_async``). The queue controls
(pause, resume, concurrency, drain) are in ``storage/control.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from awa_django.sql import queries
from awa_django.storage.queue import QueueDepth
from awa_django.storage.statement import (
    Atomic,
    Statement,
    all_rows,
    columns,
    first_bool,
    nothing,
    rows_of,
)

_SQL = queries("samples")


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueSample(QueueDepth):
    """One leader measurement of one queue: its depths when sampled; ``completed`` and
    ``failed`` count the attempts closed since the previous sample."""

    sampled_at: datetime
    completed: int
    failed: int


def record_samples(
    depths: Sequence[QueueDepth], *, interval_s: float, keep_s: float
) -> Atomic[None]:
    """Append one sample per queue in ``depths`` and drop samples older than ``keep_s``."""
    fields = ("queue", "available", "scheduled", "retryable", "running", "waiting_external")
    params = {"interval_s": interval_s, **columns(depths, *fields, "dlq", "lag_s")}
    return Atomic(
        (Statement(sql=_SQL["record_queue_samples"], params=params, read=nothing),),
        Statement(sql=_SQL["trim_queue_samples"], params={"keep_s": keep_s}, read=nothing),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueRollup:
    """One compacted bucket of one queue (``kind`` empty) or of one kind of it: the attempts
    closed in it and, for a queue, the peak depths the leader's samples saw in it."""

    queue: str
    kind: str
    bucket_at: datetime
    completed: int
    failed: int
    available: int | None
    scheduled: int | None
    retryable: int | None
    running: int | None
    dlq: int | None


def compact_samples(
    *,
    settle_s: float,
    minutes_catch_up_s: float,
    quarters_catch_up_s: float,
    keep_minutes_s: float,
    keep_quarters_s: float,
) -> Atomic[None]:
    """Roll the finished minutes up into 1-minute buckets and the finished quarter hours into
    15-minute ones, then drop the buckets past their kept windows."""
    minutes = {"settle_s": settle_s, "catch_up_s": minutes_catch_up_s}
    quarters = {"catch_up_s": quarters_catch_up_s}
    kept = {"keep_minutes_s": keep_minutes_s, "keep_quarters_s": keep_quarters_s}
    return Atomic(
        (
            Statement(sql=_SQL["roll_up_minutes"], params=minutes, read=nothing),
            Statement(sql=_SQL["roll_up_quarters"], params=quarters, read=nothing),
        ),
        Statement(sql=_SQL["trim_rollups"], params=kept, read=nothing),
    )


def rollups(*, resolution_s: int, window_s: float, per_queue: bool) -> Statement[list[QueueRollup]]:
    """The buckets of ``resolution_s`` over the last ``window_s``, oldest first: the queues'
    (``per_queue``) or their kinds'."""
    params = {"resolution_s": resolution_s, "window_s": window_s, "per_queue": per_queue}
    return Statement(
        sql=_SQL["queue_rollups"], params=params, read=all_rows, rows=rows_of(QueueRollup)
    )


def _totals(rows: list[Any]) -> dict[str, tuple[int, int, int]]:
    return {queue: (c, f, c5) for queue, c, f, c5 in rows}


def sample_totals(*, window_s: float) -> Statement[dict[str, tuple[int, int, int]]]:
    """Per queue: (completed, failed) over the window and completions of the last 5 minutes,
    as the leader's samples counted them, closures since its newest sample not included."""
    params = {"window_s": window_s}
    return Statement(sql=_SQL["queue_sample_totals"], params=params, read=_totals)


def unsampled_closures(*, window_s: float) -> Statement[dict[str, tuple[int, int, int]]]:
    """Per queue: (completed, failed, completed in the last 5 minutes) among the attempts closed
    since the leader's newest sample (or over the whole window without one), which no sample
    counts yet: added to the samples' totals, they make the counts current from the first job
    on, with or without a leader."""
    params = {"window_s": window_s}
    return Statement(sql=_SQL["unsampled_closures"], params=params, read=_totals)


def samples(*, queue: str | None, window_s: float) -> Statement[list[QueueSample]]:
    params = {"queue": queue, "window_s": window_s}
    return Statement(
        sql=_SQL["queue_samples"], params=params, read=all_rows, rows=rows_of(QueueSample)
    )


def queue_seen(*, queue: str, window_s: float) -> Statement[bool]:
    """Whether a leader's sample of ``queue`` is kept, or an attempt of it closed within
    ``window_s``: the queue health page lists such a queue even with no job or control row."""
    params = {"queue": queue, "window_s": window_s}
    return Statement(sql=_SQL["queue_seen"], params=params, read=first_bool)


def _by_queue(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["queue"]: row for row in rows}


def meta_rows() -> Statement[dict[str, dict[str, Any]]]:
    """Each queue's control row (``awa.queue_meta``), by queue."""
    return Statement(sql=_SQL["queue_meta_rows"], read=_by_queue, rows=rows_of(dict))
