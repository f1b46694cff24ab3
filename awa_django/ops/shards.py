"""Enqueue shards: splitting a hot queue into several lanes per priority.

A queue starts with one shard: strict FIFO per (queue, priority). With N shards, producers
spread immediate jobs over N lanes (a random shard, or the shard of the job's ``ordering_key``)
and claimers take from all of them, so producers and claimers stop serialising on one lane
lock. Order then holds within a shard only; jobs that must stay in order share an ordering key.
"""

from __future__ import annotations

from typing import Final

from django.db import connections

from awa_django.conf import get_settings
from awa_django.exceptions import InvalidJob
from awa_django.ops.known import queue_known, unknown_queue_message
from awa_django.storage import lanes
from awa_django.storage.statement import run, run_atomic

MAX_ENQUEUE_SHARDS: Final = 64


def _check_queue(queue: str) -> str:
    """The alias holding ``queue``, once it is known there. Any known queue, as for pause and
    drain: another service's, or one that still holds jobs."""
    if not queue_known(queue):
        raise InvalidJob(unknown_queue_message(queue), field="queue")
    return get_settings().queue_database(queue)


def set_enqueue_shards(queue: str, shards: int) -> None:
    """Split ``queue`` into ``shards`` enqueue shards (1 restores strict per-priority FIFO).

    Takes effect for jobs enqueued after the change commits; jobs already waiting stay in the
    lanes they were enqueued to and are still claimed.
    """
    alias = _check_queue(queue)
    if (
        isinstance(shards, bool)
        or not isinstance(shards, int)
        or not 1 <= shards <= MAX_ENQUEUE_SHARDS
    ):
        raise InvalidJob(
            f"shards must be an integer 1..{MAX_ENQUEUE_SHARDS}, got {shards!r}", field="shards"
        )
    with connections[alias].cursor() as cursor:
        run_atomic(cursor, lanes.set_enqueue_shards(queue=queue, shards=shards))


def get_enqueue_shards(queue: str) -> int:
    """How many enqueue shards ``queue`` has."""
    with connections[_check_queue(queue)].cursor() as cursor:
        return run(cursor, lanes.enqueue_shards(queue=queue))


def lane_backlog(queue: str) -> list[lanes.LaneBacklog]:
    """Jobs waiting in each (priority, shard) lane of ``queue`` that has any."""
    with connections[_check_queue(queue)].cursor() as cursor:
        return run(cursor, lanes.lane_backlog(queue=queue))


def enqueue_shard_counts(*, database: str | None = None) -> dict[str, int]:
    """The enqueue shard count of every queue of ``database`` (default
    ``AWA["DATABASE_ALIAS"]``) that has set one; any other queue has 1."""
    with connections[get_settings().operator_database(database)].cursor() as cursor:
        return run(cursor, lanes.ENQUEUE_SHARD_COUNTS)


def all_lane_backlogs(*, database: str | None = None) -> list[lanes.LaneBacklog]:
    """Jobs waiting in each lane of every queue of ``database`` (default
    ``AWA["DATABASE_ALIAS"]``), by queue, priority and shard. It counts every waiting job, so
    it takes about as long as live queue depths."""
    with connections[get_settings().operator_database(database)].cursor() as cursor:
        return run(cursor, lanes.lane_backlog(queue=None))
