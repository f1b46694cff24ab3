"""Queue plane: appending ready rows and claiming them.

How it works: a lane is one ordered ``(queue, priority, shard)`` stream. A producer appends
immutable rows to the ready ring and takes no lock; when its transaction commits, a deferred
trigger appends one ``lane_commits`` row per lane it wrote, at the lane's next commit position,
and that row is what makes the rows claimable. A claimer tries the lane's claim lock (an
advisory lock; a lane held by another claimer is skipped), derives the cursor from the lane's
newest claim receipt and appends receipts for the next rows, commit by commit. No row is ever
updated: the SQL functions behind these calls live in the substrate migration.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, Final

from awa_django.sql import queries
from awa_django.storage import copy_text
from awa_django.storage.copy_text import CopyBatch
from awa_django.storage.statement import (
    Copy,
    J,
    RowsOf,
    Statement,
    all_rows,
    first_int,
    first_row,
    nothing,
    rows_of,
)

_SQL = queries("queue")


@dataclass(frozen=True, slots=True, kw_only=True)
class NewJob:
    """One job to enqueue, already validated; ``args_json`` is canonical JSON text."""

    kind: str
    queue: str
    priority: int
    args_json: str
    max_attempts: int
    run_at: datetime | None
    metadata_json: str
    tags: Sequence[str]


# The jsonb columns of a claimed job (Django's connection hands them back as text).
CLAIMED_JOB_JSON: Final = ("args", "metadata", "errors", "progress", "checkpoint")

# What the caller's row maker makes of a claimed row (core's ClaimedJob).


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimRequest:
    """How a worker of one queue claims, built once per queue: ``deadline_s`` > 0 gives each
    attempt a hard deadline, ``aging_s`` > 0 raises a waiting job's priority one step per that
    many seconds (0 disables aging), ``sequential`` runs each lane one job at a time."""

    queue: str
    claimed_by: str
    deadline_s: float
    aging_s: float = 0.0
    sequential: bool = False

    def params(self, *, limit: int, aged: bool) -> dict[str, Any]:
        """The claim statements' parameters for one claim of up to ``limit`` jobs; ``aged``
        False compares lanes by static priority (see the dispatcher's aging refresh)."""
        return {
            "queue": self.queue,
            "limit": limit,
            "claimed_by": self.claimed_by,
            "deadline_s": self.deadline_s,
            "aging_s": self.aging_s if aged else 0.0,
            "sequential": self.sequential,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueDepth:
    """How many jobs of one queue are in each live state, and how late its oldest waiting job is."""

    queue: str
    available: int
    scheduled: int
    retryable: int
    running: int
    # Seconds since the run_at of the oldest waiting ready row; 0 when nothing waits.
    lag_s: float
    # Open attempts parked on an external callback (their lease has a callback_id); not
    # counted in ``running``.
    waiting_external: int = 0
    # Entries held in the dead-letter queue.
    dlq: int = 0


def enqueue_job(job: NewJob, *, alone: bool = False) -> Statement[int]:
    """Enqueue one job in the caller's transaction; answers its id. ``alone`` says the statement
    is its whole transaction (autocommit): the job is then published by the statement itself,
    not by a trigger at the commit (``awa.enqueue_job_alone``)."""
    return Statement(
        sql=_SQL["enqueue_job_alone" if alone else "enqueue_job"],
        params={
            "kind": job.kind,
            "queue": job.queue,
            "priority": job.priority,
            "args": job.args_json,
            "max_attempts": job.max_attempts,
            "run_at": job.run_at,
            "metadata": job.metadata_json,
            "tags": copy_text.text_array(job.tags),
        },
        read=first_int,
    )


def copy_ready(batch: CopyBatch, args_json: Iterable[str]) -> Copy[tuple[Any, ...], list[int]]:
    """Append a batch of immediate jobs to one lane with COPY; answers their ids in order.

    The lane's shard is the ordering key's (or a random one when there is none). The first row
    announces the batch, which the transaction publishes when it commits."""
    reserve = Statement(
        sql=_SQL["reserve_ready_batch"],
        params={
            "queue": batch.queue,
            "priority": batch.priority,
            "count": batch.count,
            "ordering_key": batch.ordering_key,
        },
        read=first_row,
    )
    return Copy(
        reserve=reserve,
        sql=_SQL["copy_ready"],
        lines=partial(_ready_lines, batch, args_json),
        answer=_reserved_ids,
    )


def _reserved_ids(reserved: tuple[Any, ...]) -> list[int]:
    return list(reserved[3])


def _ready_lines(
    batch: CopyBatch, args_json: Iterable[str], reserved: tuple[Any, ...]
) -> Iterator[str]:
    slot, generation, lane_seqs, job_ids, shard = reserved
    # Columns in copy_ready's order; only the position, the id and the arguments vary by row.
    lane = copy_text.fields(batch.queue, batch.priority, shard)
    place = copy_text.fields(slot, generation)
    body = copy_text.field(batch.kind)
    tail = batch.tail()
    return (
        f"{lane}\t{lane_seq}\t{place}\t{job_id}\t{body}\t{copy_text.text_field(args)}\t{tail}"
        f"\t{'t' if position == 0 else 'f'}\n"
        for position, (job_id, lane_seq, args) in enumerate(
            zip(job_ids, lane_seqs, args_json, strict=True)
        )
    )


def claim_ready(
    request: ClaimRequest, *, rows: RowsOf[J], limit: int, aged: bool = True
) -> Statement[list[J]]:
    """Claim up to ``limit`` jobs of the request's queue in one statement (in autocommit, or in
    the caller's transaction); ``rows`` makes each job from its row
    (``core.claimed_job.claimed_job_rows``)."""
    return Statement(
        sql=_SQL["claim_ready"],
        params=request.params(limit=limit, aged=aged),
        read=all_rows,
        rows=rows,
        json=CLAIMED_JOB_JSON,
    )


def claim_ready_in_turn(
    request: ClaimRequest,
    *,
    rows: RowsOf[J],
    limit: int,
    lane: tuple[int, int] | None,
    lock_timeout_s: float,
    aged: bool = True,
) -> Statement[list[J]]:
    """As ``claim_ready``, after waiting up to ``lock_timeout_s`` for the claim lock of
    ``lane`` (its priority and shard) while another claimer holds it, instead of skipping it;
    with no lane, for the first lane of the queue another session holds the lock of (and no
    claim at all when there is none). Past the timeout the statement fails with
    ``psycopg.errors.LockNotAvailable``."""
    priority, shard = lane if lane is not None else (None, None)
    return Statement(
        sql=_SQL["claim_ready_in_turn"],
        params={
            **request.params(limit=limit, aged=aged),
            "priority": priority,
            "shard": shard,
            "lock_timeout_ms": str(max(1, round(lock_timeout_s * 1000))),
        },
        read=all_rows,
        rows=rows,
        json=CLAIMED_JOB_JSON,
    )


def notify_queues(queues: Sequence[str]) -> Statement[None]:
    """Wake the workers of ``queues`` (on an autocommit connection: delivered at once)."""
    return Statement(sql=_SQL["notify_queues"], params={"queues": list(queues)}, read=nothing)


def cancel_jobs(*, job_ids: Sequence[int], reason: str) -> Statement[list[tuple[int, str]]]:
    """Cancel each of ``job_ids``, in that order, in the caller's transaction; answers each
    job's id with the outcome name of awa.cancel_job."""
    return Statement(
        sql=_SQL["cancel_jobs"],
        params={"job_ids": list(job_ids), "reason": reason},
        read=all_rows,
    )


def queue_depths() -> Statement[list[QueueDepth]]:
    """Depth and lag of every known queue, in one statement."""
    return Statement(sql=_SQL["queue_depths"], read=all_rows, rows=rows_of(QueueDepth))
