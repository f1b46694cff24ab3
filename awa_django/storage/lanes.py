"""Lane layout: a queue's enqueue shard count and its backlog per (priority, shard) lane, the
leader's cleanup of the lane marks claims append, and the creation of lanes outside producers'
transactions.

A lane's first use creates it: its ``queue_lanes`` row and its commit sequence. Created inside a
producer's transaction, both stay uncommitted, and the lane's creation lock held, for as long as
that transaction stays open, and a transaction that publishes early (``check_constraints()``)
and stays open would make every other producer of the lane wait for it at its commit. So
``ensure_lanes`` creates the lanes of a queue and priority on a short connection of its own, in
autocommit, before the producer's first job of them; the producer's commit then only finds the
lane's sequence (docs/architecture.md, "Lanes are created outside producers' transactions").
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Final

import psycopg

from awa_django.sql import queries
from awa_django.storage.connections import connection_kwargs
from awa_django.storage.statement import Atomic, Statement, all_rows, first_int, nothing, rows_of

_SQL = queries("lanes")

logger = logging.getLogger(__name__)

# (alias, queue, priority) whose lanes this process made sure exist, on every shard the queue
# had then (a later change of the shard count creates the new shards' lanes itself). Lanes are
# never dropped but by awa.reset_all, which forgets them here (``forget_lanes``); a lane that a
# reset in another process dropped is created again at the producer's commit, as a raw-SQL
# enqueue's is.
_known: Final[set[tuple[str, str, int]]] = set()
# After a failed attempt (no connection to spare, a schema not migrated yet), producers of the
# alias enqueue without it for this long, leaving lane creation to their commits, rather than
# trying a connection per enqueue.
RETRY_AFTER_S: Final = 30.0
_retry_at: Final[dict[str, float]] = {}


@dataclass(frozen=True, slots=True)
class LaneBacklog:
    queue: str
    priority: int
    shard: int
    waiting: int


def set_enqueue_shards(*, queue: str, shards: int) -> Atomic[None]:
    """Set the shard count and create the new shards' lanes at every priority the queue has
    used, committed together (keep the transaction short: a producer's first job of a lane
    waits for it)."""
    return Atomic(
        (
            Statement(
                sql=_SQL["set_enqueue_shards"],
                params={"queue": queue, "shards": shards},
                read=nothing,
            ),
        ),
        Statement(sql=_SQL["create_shard_lanes"], params={"queue": queue}, read=nothing),
    )


def create_lanes(*, queue: str, priority: int) -> Statement[None]:
    """Create the lanes of ``queue`` and ``priority`` on every shard the queue has (those that
    exist are left as they are)."""
    params = {"queue": queue, "priority": priority}
    return Statement(sql=_SQL["ensure_lanes"], params=params, read=nothing)


def ensure_lanes(alias: str, queue: str, priority: int) -> None:
    """Make sure the lanes of ``queue`` and ``priority`` exist on the database of ``alias``,
    creating them in a transaction of their own, before a producer enqueues to them in its.

    Known lanes cost nothing: no statement is sent. Otherwise a short autocommit connection is
    opened from the alias's settings (through PgBouncer's transaction mode too), runs one
    statement and closes. When that fails, the enqueue goes on and its commit creates the lane,
    as before this existed."""
    key = (alias, queue, priority)
    if key in _known:
        return
    now = time.monotonic()
    if _retry_at.get(alias, 0.0) > now:
        return
    try:
        with psycopg.connect(
            **connection_kwargs(alias, application_name="awa_lanes"), autocommit=True
        ) as conn:
            # A plain psycopg connection, neither executor's: the statement's parameters as is.
            lanes = create_lanes(queue=queue, priority=priority)
            conn.execute(lanes.sql, lanes.params)
    except psycopg.Error as error:
        _retry_at[alias] = now + RETRY_AFTER_S
        logger.warning(
            "awa: could not create the lanes of queue %r (priority %d) on a connection of their "
            "own (%s); for %.0f s, producers' commits create the lanes they first use",
            queue,
            priority,
            str(error).strip() or type(error).__name__,
            RETRY_AFTER_S,
        )
        return
    _known.add(key)


def forget_lanes() -> None:
    """Forget the lanes known to exist (``awa.reset_all`` has just dropped them)."""
    _known.clear()
    _retry_at.clear()


def enqueue_shards(*, queue: str) -> Statement[int]:
    """How many enqueue shards ``queue`` has (coalesce always answers)."""
    return Statement(sql=_SQL["enqueue_shards"], params={"queue": queue}, read=first_int)


def lane_backlog(*, queue: str | None) -> Statement[list[LaneBacklog]]:
    """The waiting jobs of each lane of ``queue`` (of every queue when None) that has any."""
    return Statement(
        sql=_SQL["lane_backlog"], params={"queue": queue}, read=all_rows, rows=rows_of(LaneBacklog)
    )


def _shard_counts(rows: list[Any]) -> dict[str, int]:
    return {queue: int(shards) for queue, shards in rows}


ENQUEUE_SHARD_COUNTS: Statement[dict[str, int]] = Statement(
    sql=_SQL["enqueue_shard_counts"], read=_shard_counts
)


def delete_superseded_lane_marks(*, limit: int) -> Statement[int]:
    """Delete one bounded batch of lane marks nobody reads any more; answers how many went."""
    params = {"limit": limit}
    return Statement(sql=_SQL["delete_superseded_lane_marks"], params=params, read=len)
