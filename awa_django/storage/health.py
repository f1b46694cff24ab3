"""Queue health storage: the leader's per-queue samples, pause/resume/drain, and the reads the
``awa.queues`` API is built from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.backends.utils import CursorWrapper
from psycopg import AsyncConnection

from awa_django.sql import queries
from awa_django.storage.queue import QueueDepth
from awa_django.storage.statement import Statement, all_rows, rows_of, run

_SQL = queries("health")


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueSample:
    """One leader measurement of one queue; ``completed`` and ``failed`` count the attempts
    closed since the previous sample."""

    queue: str
    sampled_at: datetime
    available: int
    scheduled: int
    retryable: int
    running: int
    waiting_external: int
    dlq: int
    lag_s: float
    completed: int
    failed: int


async def record_samples(
    conn: AsyncConnection[Any], depths: Sequence[QueueDepth], *, interval_s: float, keep_s: float
) -> None:
    """Append one sample per queue in ``depths`` and drop samples older than ``keep_s``."""
    async with conn.transaction():
        await conn.execute(
            _SQL["record_queue_samples"],
            {
                "interval_s": interval_s,
                "queues": [d.queue for d in depths],
                "available": [d.available for d in depths],
                "scheduled": [d.scheduled for d in depths],
                "retryable": [d.retryable for d in depths],
                "running": [d.running for d in depths],
                "waiting_external": [d.waiting_external for d in depths],
                "dlq": [d.dlq for d in depths],
                "lag_s": [d.lag_s for d in depths],
            },
        )
        await conn.execute(_SQL["trim_queue_samples"], {"keep_s": keep_s})


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


async def compact_samples(
    conn: AsyncConnection[Any],
    *,
    settle_s: float,
    minutes_catch_up_s: float,
    quarters_catch_up_s: float,
    keep_minutes_s: float,
    keep_quarters_s: float,
) -> None:
    """Roll the finished minutes up into 1-minute buckets and the finished quarter hours into
    15-minute ones, then drop the buckets past their kept windows."""
    async with conn.transaction():
        await conn.execute(
            _SQL["roll_up_minutes"], {"settle_s": settle_s, "catch_up_s": minutes_catch_up_s}
        )
        await conn.execute(_SQL["roll_up_quarters"], {"catch_up_s": quarters_catch_up_s})
        await conn.execute(
            _SQL["trim_rollups"],
            {"keep_minutes_s": keep_minutes_s, "keep_quarters_s": keep_quarters_s},
        )


def rollups(
    cursor: CursorWrapper, *, resolution_s: int, window_s: float, per_queue: bool
) -> list[QueueRollup]:
    """The buckets of ``resolution_s`` over the last ``window_s``, oldest first: the queues'
    (``per_queue``) or their kinds'."""
    params = {"resolution_s": resolution_s, "window_s": window_s, "per_queue": per_queue}
    read = Statement(
        sql=_SQL["queue_rollups"], params=params, read=all_rows, rows=rows_of(QueueRollup)
    )
    return run(cursor, read)


def sample_totals(cursor: CursorWrapper, *, window_s: float) -> dict[str, tuple[int, int, int]]:
    """Per queue: (completed, failed) over the window and completions of the last 5 minutes,
    as the leader's samples counted them, closures since its newest sample not included."""
    cursor.execute(_SQL["queue_sample_totals"], {"window_s": window_s})
    return {queue: (c, f, c5) for queue, c, f, c5 in cursor.fetchall()}


def unsampled_closures(
    cursor: CursorWrapper, *, window_s: float
) -> dict[str, tuple[int, int, int]]:
    """Per queue: (completed, failed, completed in the last 5 minutes) among the attempts closed
    since the leader's newest sample (or over the whole window without one), which no sample
    counts yet: added to the samples' totals, they make the counts current from the first job
    on, with or without a leader."""
    cursor.execute(_SQL["unsampled_closures"], {"window_s": window_s})
    return {queue: (c, f, c5) for queue, c, f, c5 in cursor.fetchall()}


def samples(cursor: CursorWrapper, *, queue: str | None, window_s: float) -> list[QueueSample]:
    params = {"queue": queue, "window_s": window_s}
    read = Statement(
        sql=_SQL["queue_samples"], params=params, read=all_rows, rows=rows_of(QueueSample)
    )
    return run(cursor, read)


def queue_seen(cursor: CursorWrapper, *, queue: str, window_s: float) -> bool:
    """Whether a leader's sample of ``queue`` is kept, or an attempt of it closed within
    ``window_s``: the queue health page lists such a queue even with no job or control row."""
    cursor.execute(_SQL["queue_seen"], {"queue": queue, "window_s": window_s})
    row = cursor.fetchone()
    assert row is not None  # EXISTS always answers
    return bool(row[0])


def meta_rows(cursor: CursorWrapper) -> dict[str, dict[str, Any]]:
    read = Statement(sql=_SQL["queue_meta_rows"], read=all_rows, rows=rows_of(dict))
    return {row["queue"]: row for row in run(cursor, read)}


def pause(cursor: CursorWrapper, *, queue: str, by: str) -> None:
    cursor.execute(_SQL["pause_queue"], {"queue": queue, "by": by})


def resume(cursor: CursorWrapper, *, queue: str) -> None:
    cursor.execute(_SQL["resume_queue"], {"queue": queue})


def set_concurrency(cursor: CursorWrapper, *, queue: str, concurrency: int | None, by: str) -> None:
    """Set (or, with None, reset) ``queue``'s live concurrency; its workers are told at commit."""
    cursor.execute(
        _SQL["set_queue_concurrency"], {"queue": queue, "concurrency": concurrency, "by": by}
    )


async def concurrency_overrides(
    conn: AsyncConnection[Any], *, queues: Sequence[str]
) -> dict[str, int]:
    """The live concurrency operators set, for those of ``queues`` that have one."""
    cursor = await conn.execute(_SQL["queue_concurrency"], {"queues": list(queues)})
    return {queue: int(concurrency) for queue, concurrency in await cursor.fetchall()}


def drain_candidates(cursor: CursorWrapper, *, queue: str) -> int:
    """How many pending jobs ``drain`` would cancel now, for its confirmation page."""
    cursor.execute(_SQL["drain_candidates"], {"queue": queue})
    row = cursor.fetchone()
    assert row is not None  # count(*) always answers
    return int(row[0])


def drain(cursor: CursorWrapper, *, queue: str, reason: str) -> int:
    cursor.execute(_SQL["drain_queue"], {"queue": queue, "reason": reason})
    row = cursor.fetchone()
    assert row is not None  # the function always answers
    return int(row[0])
