"""Builds a history of finished jobs fast, in the shape real runs leave (#32 item 6, #36 item 1).

A worker drains no-op jobs at thousands a second; a benchmark that needs millions of retained
jobs (``benchmarks/depth.py``'s ``--history``, ``benchmarks/admin_pages.py``) would spend most
of its time building them. Here each chunk of jobs goes through the queue's own paths, only
without a worker process in between:

- ``awa.enqueue_many`` writes the chunk (the bulk producer's COPY into the ready ring, published
  to its lane at commit), on a second connection while the chunk before it closes;
- one ``awa.claim_ready`` call claims all of it, with the claim settings a worker's dispatcher of
  that queue uses (deadline, aging, order), appending the receipts (and leases, with a deadline);
- one ``awa.close_batch`` call closes every attempt with the chunk's outcome, as the worker's
  completer does (a no-op handler's result: none; a failure's error entry), writing the done
  entries and releasing the leases;
- the leader's ring rotation runs after each chunk (nothing is pruned: the shipped retention
  keeps a day).

``tests/benchmarks/test_history_fill.py`` compares a filled database with a worker-drained one,
table by table, and runs ``manage.py awa_audit`` on it. ``settle`` then runs the rescuer's pass
a running leader makes once the claims are older than its staleness window.

Callers have Django set up on the database to fill; the queue must hold no other available job
(the claim would take it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from awa_django.sql import parse_blocks

SQL = parse_blocks((Path(__file__).parent / "history_fill.sql").read_text())
# Jobs per chunk: one enqueue_many, one claim and one close. Larger chunks cost the server
# memory for the close's JSON document, not time.
CHUNK = 100_000
CLAIMED_BY = "history-fill"


@dataclass(frozen=True, slots=True)
class Failure:
    """The error a failed chunk's attempts record (awa's error entry: type and message)."""

    type: str
    message: str


def fill(
    jobs: int,
    kind: str,
    *,
    queue: str,
    args: Callable[[int], dict[str, Any]] = lambda n: {"n": n},
    failure: Failure | None = None,
    chunk: int = CHUNK,
    **options: Any,
) -> list[int]:
    """Enqueues ``jobs`` jobs of ``kind`` on ``queue`` (``args(n)`` for the n-th, ``options``
    as ``awa.enqueue_many`` takes them), and runs each to completion, or to failure with
    ``failure``'s error; answers their ids."""
    from django.db import connection

    import awa_django as awa
    from awa_django.conf import get_settings
    from awa_django.maintenance.rings import ROTATIONS_KEPT
    from awa_django.worker.process import config_from_settings

    dispatcher = config_from_settings(get_settings(), queues={queue: 1}).dispatcher(
        queue, claimed_by=CLAIMED_BY
    )
    claim = {
        "queue": queue,
        "claimed_by": CLAIMED_BY,
        "deadline_s": dispatcher.deadline_s,
        "aging_s": dispatcher.aging_s,
        "sequential": dispatcher.sequential,
    }
    close = {
        "outcome": "completed" if failure is None else "failed",
        "error_type": None if failure is None else failure.type,
        "error_message": None if failure is None else failure.message,
    }

    def enqueue(first: int) -> list[int]:
        last = min(first + chunk, jobs)
        return awa.enqueue_many(kind, [args(n) for n in range(first, last)], queue=queue, **options)

    def enqueue_apart(first: int) -> list[int]:
        # On a thread of its own, with its own connection (Django's are per thread).
        try:
            return enqueue(first)
        finally:
            connection.close()

    ids: list[int] = []
    with ThreadPoolExecutor(max_workers=1) as producer, connection.cursor() as cursor:
        cursor.execute(SQL["create_claimed"])
        chunk_ids = enqueue(0) if jobs > 0 else []
        for first in range(0, jobs, chunk):
            size = len(chunk_ids)
            cursor.execute(SQL["claim_chunk"], {**claim, "limit": size})
            cursor.execute(
                SQL["claimed_chunk"], {"first_id": min(chunk_ids), "last_id": max(chunk_ids)}
            )
            claimed, ours = cursor.fetchone()
            if (claimed, ours) != (size, size):
                raise RuntimeError(
                    f"claimed {ours} of the {size} jobs enqueued and {claimed - ours} others "
                    f"of queue {queue!r}: the queue held other jobs"
                )
            # The next chunk is written while this one closes (never while it is claimed, so
            # the claim takes only this chunk's jobs): the producer's work and the server's
            # close overlap, as a producer and a worker's completer do.
            following = first + chunk
            upcoming = producer.submit(enqueue_apart, following) if following < jobs else None
            cursor.execute(SQL["close_chunk"], close)
            (closed,) = cursor.fetchone()
            if closed != size:
                raise RuntimeError(f"closed {closed} of {size} attempts")
            cursor.execute(SQL["rotate_rings"], {"keep": ROTATIONS_KEPT})
            ids += chunk_ids
            chunk_ids = upcoming.result() if upcoming is not None else []
    return ids


def settle() -> None:
    """One complete pass of the leader's rescuer, with a staleness every claim is past: what a
    running leader leaves once the build's claims are older than its heartbeat staleness window
    (awa.rescue_marks), so reads of open attempts start after them."""
    from awa_django.conf import get_settings
    from awa_django.core.retry import RetryPolicy
    from awa_django.maintenance.rescuer import RescueConfig, Rescuer
    from awa_django.storage.connections import open_pool

    async def rescue() -> None:
        pool = await open_pool("default", max_size=1)
        try:
            rescuer = Rescuer(
                pool,
                RescueConfig(interval_s=1, staleness_s=0.001, batch_size=1_000),
                policy=RetryPolicy.from_settings(get_settings()),
                now=lambda: datetime.now(UTC),
            )
            await rescuer.run_once()
        finally:
            await pool.close()

    asyncio.run(rescue())
