"""Lane layout: a queue's enqueue shard count and its backlog per (priority, shard) lane, and
the leader's cleanup of the lane marks claims append."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.backends.utils import CursorWrapper
from psycopg import AsyncConnection

from awa_django.sql import queries

_SQL = queries("lanes")


@dataclass(frozen=True, slots=True)
class LaneBacklog:
    queue: str
    priority: int
    shard: int
    waiting: int


def set_enqueue_shards(cursor: CursorWrapper, *, queue: str, shards: int) -> None:
    cursor.execute(_SQL["set_enqueue_shards"], {"queue": queue, "shards": shards})


def enqueue_shards(cursor: CursorWrapper, *, queue: str) -> int:
    cursor.execute(_SQL["enqueue_shards"], {"queue": queue})
    row = cursor.fetchone()
    assert row is not None  # coalesce always answers
    return int(row[0])


def lane_backlog(cursor: CursorWrapper, *, queue: str | None) -> list[LaneBacklog]:
    """The waiting jobs of each lane of ``queue`` (of every queue when None) that has any."""
    cursor.execute(_SQL["lane_backlog"], {"queue": queue})
    return [LaneBacklog(*row) for row in cursor.fetchall()]


def enqueue_shard_counts(cursor: CursorWrapper) -> dict[str, int]:
    cursor.execute(_SQL["enqueue_shard_counts"])
    return {queue: shards for queue, shards in cursor.fetchall()}


async def delete_superseded_lane_marks(conn: AsyncConnection[Any], *, limit: int) -> int:
    """Delete one bounded batch of lane marks nobody reads any more; returns how many went."""
    cursor = await conn.execute(_SQL["delete_superseded_lane_marks"], {"limit": limit})
    return cursor.rowcount
