"""Execution plane: closing attempts with the run_lease guard."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Final, Protocol

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from awa_django.exact_json import exact_text
from awa_django.sql import queries
from awa_django.storage.queue import ClaimedJob
from awa_django.storage.statement import Statement, nothing

_SQL = queries("execution")


class Outcome(StrEnum):
    """How an attempt closed; the first three are terminal for the job."""

    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    RETRYABLE = "retryable"
    SNOOZED = "snoozed"


_ADDRESS_FIELDS: Final = (
    "ready_slot",
    "queue",
    "priority",
    "shard",
    "lane_seq",
    "job_id",
    "run_lease",
)


def receipt_address(item: Any) -> dict[str, Any]:
    """The fields that name an attempt's receipt (and so guard its writes), from a claimed job
    or any value carrying them."""
    return {name: getattr(item, name) for name in _ADDRESS_FIELDS}


def address_arrays(items: Sequence[Any]) -> dict[str, list[Any]]:
    """The receipt address of a batch as parallel arrays, the shape the SQL functions unnest."""
    return {name: [getattr(item, name) for item in items] for name in _ADDRESS_FIELDS}


class Attempt(Protocol):
    """What closing an attempt needs to know of it: its receipt address, and the attempt
    counts the retry policy reads (a ``ClaimedJob``, or the ``Completion`` of the attempt)."""

    @property
    def job_id(self) -> int: ...
    @property
    def run_lease(self) -> int: ...
    @property
    def queue(self) -> str: ...
    @property
    def priority(self) -> int: ...
    @property
    def shard(self) -> int: ...
    @property
    def lane_seq(self) -> int: ...
    @property
    def ready_slot(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def max_attempts(self) -> int: ...


# Not frozen: built per finished attempt on the hot path (see ClaimedJob).
@dataclass(slots=True, kw_only=True)
class Completion:
    """The result of one attempt, addressed by its receipt and guarded by its run_lease."""

    job_id: int
    run_lease: int
    queue: str
    priority: int
    shard: int
    lane_seq: int
    ready_slot: int
    outcome: Outcome
    # Seconds until a retryable or snoozed job runs again (None otherwise), counted from the
    # database's clock when the completion is written: a worker's own clock may be off.
    delay_s: float | None = None
    # This attempt's error (or cancel reason) as a JSON object.
    error: dict[str, Any] | None = None
    # Progress and checkpoint the attempt reported; None leaves the saved ones unchanged.
    progress: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None
    # A completed attempt's return value as JSON text (a handler's value other than None, or a
    # django.tasks result, made a ``StoredReturn`` in the handler); None stores nothing.
    result_json: str | None = None
    # Carried for signals, metrics and logs, and for closing the attempt another way when the
    # database refuses this completion (never written): saves re-reading the job.
    kind: str = ""
    attempt: int = 0
    max_attempts: int = 0

    @classmethod
    def of(cls, job: Attempt, outcome: Outcome, **details: Any) -> Completion:
        """The completion of ``job``'s attempt, addressed by its receipt."""
        # The address is spelled out, not receipt_address(job): one is built per finished
        # attempt, and the getattr loop and its dict were a measurable part of its cost.
        return cls(
            job_id=job.job_id,
            run_lease=job.run_lease,
            queue=job.queue,
            priority=job.priority,
            shard=job.shard,
            lane_seq=job.lane_seq,
            ready_slot=job.ready_slot,
            outcome=outcome,
            kind=job.kind,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            **details,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveAttempt:
    """An attempt a worker is running, as its heartbeat reports it."""

    job_id: int
    run_lease: int
    queue: str
    priority: int
    shard: int
    lane_seq: int
    ready_slot: int
    progress: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None

    @classmethod
    def of(cls, job: ClaimedJob, **details: Any) -> LiveAttempt:
        """``job``'s running attempt, addressed by its receipt."""
        return cls(
            **receipt_address(job),
            **details,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Rescuable:
    """An open attempt the leader must rescue, and why ('deadline', 'heartbeat' or
    'callback_timeout')."""

    reason: str
    job: ClaimedJob


def _json_or_none(value: dict[str, Any] | None) -> Jsonb | None:
    return None if value is None else Jsonb(value, dumps=exact_text)


# The attempts a close statement closed, (job_id, run_lease), each with when its job runs again
# (retried or snoozed; None otherwise).
Closed = dict[tuple[int, int], datetime | None]


def _closed(rows: list[tuple[Any, ...]]) -> Closed:
    return {(int(job_id), int(lease)): run_at for job_id, lease, run_at in rows}


def close_attempts(completions: Sequence[Completion]) -> Statement[Closed]:
    """Write a batch of completions in one statement; answers the attempts that closed.
    Anything missing was stale: an older lease, or an attempt closed by someone else."""
    return Statement(sql=_SQL["close_attempts"], params=close_params(completions), read=_closed)


def close_params(completions: Sequence[Completion]) -> dict[str, str]:
    """The parameters of the close statement: the batch as one JSON array, in the shape
    awa.close_attempts reads; a key that is missing reads as NULL there."""
    return {"batch": "[" + ",".join(_close_item(c) for c in completions) + "]"}


# JSON string literals of queue names (a worker serves a handful; bounded by the cap below).
_QUEUE_LITERALS: dict[str, str] = {}
_QUEUE_LITERALS_MAX: Final = 1024


def _close_item(c: Completion) -> str:
    # Nearly every item closes an attempt that succeeded and stored nothing: its JSON is its
    # address and outcome, all integers and known strings, formatted directly. Building a dict
    # for json.dumps cost twice as much, the integer checks included, and sent five nulls
    # (docs/benchmarks.md).
    if (
        c.delay_s is None
        and c.error is None
        and c.progress is None
        and c.checkpoint is None
        and c.result_json is None
    ):
        queue = _QUEUE_LITERALS.get(c.queue)
        if queue is None:
            queue = json.dumps(c.queue)
            if len(_QUEUE_LITERALS) < _QUEUE_LITERALS_MAX:
                _QUEUE_LITERALS[c.queue] = queue
        return (
            f'{{"ready_slot":{c.ready_slot:d},"queue":{queue},"priority":{c.priority:d},'
            f'"shard":{c.shard:d},"lane_seq":{c.lane_seq:d},"job_id":{c.job_id:d},'
            f'"run_lease":{c.run_lease:d},"outcome":"{c.outcome.value}"}}'
        )
    details = {
        "delay_s": c.delay_s,
        "error": c.error,
        "progress": c.progress,
        "checkpoint": c.checkpoint,
        # Already serialized (and size-checked) by the executor: sent as text.
        "result": c.result_json,
    }
    # The receipt address is spelled out, not receipt_address(c): a dict literal per
    # completion costs a fraction of its getattr loop. exact_text: a checkpoint's large floats
    # must reach jsonb written out in full, as the enqueue writes arguments.
    return exact_text(
        {
            "ready_slot": c.ready_slot,
            "queue": c.queue,
            "priority": c.priority,
            "shard": c.shard,
            "lane_seq": c.lane_seq,
            "job_id": c.job_id,
            "run_lease": c.run_lease,
            "outcome": c.outcome.value,
            **{name: value for name, value in details.items() if value is not None},
        }
    )


async def heartbeat_attempts(
    conn: AsyncConnection[Any], attempts: Sequence[LiveAttempt], *, claimed_by: str
) -> set[tuple[int, int]]:
    """Heartbeat ``attempts`` and save their progress in one statement; returns the
    (job_id, run_lease) pairs still open. The rest were closed by rescue or cancel."""
    cursor = await conn.execute(
        _SQL["heartbeat_attempts"],
        {
            **address_arrays(attempts),
            "progress": [_json_or_none(a.progress) for a in attempts],
            "checkpoint": [_json_or_none(a.checkpoint) for a in attempts],
            "claimed_by": claimed_by,
        },
    )
    return {(int(job_id), int(lease)) for job_id, lease in await cursor.fetchall()}


@dataclass(frozen=True, slots=True)
class RescueCursor:
    """Where the next rescue pass starts looking: every lease-less receipt claimed before
    ``claimed_after`` or due before ``deadline_after`` was seen by a complete pass."""

    claimed_after: datetime
    deadline_after: datetime


@dataclass(frozen=True, slots=True)
class RescueScan:
    """One pass's finds, and the cursor the next pass may start from once these are closed."""

    found: list[Rescuable]
    next_cursor: RescueCursor


async def find_rescuable(
    conn: AsyncConnection[Any],
    *,
    staleness_s: float,
    limit: int,
    since: RescueCursor | None = None,
) -> RescueScan:
    """Open attempts past their deadline, silent for longer than ``staleness_s`` or past their
    callback timeout; ``since`` None looks at every retained receipt."""
    params = {
        "staleness_s": staleness_s,
        "limit": limit,
        "claimed_after": None if since is None else since.claimed_after,
        "deadline_after": None if since is None else since.deadline_after,
    }
    # One transaction, so the cursor's bounds are the very cutoffs the scan used (now() is
    # the transaction's start).
    async with conn.transaction():
        cursor = await conn.execute(_SQL["rescue_cutoffs"], params)
        cutoffs = await cursor.fetchone()
        assert cutoffs is not None  # a SELECT without FROM returns its one row
        cursor = await conn.execute(_SQL["find_rescuable"], params)
        names = [column.name for column in cursor.description or ()]
        found = []
        for row in await cursor.fetchall():
            values = dict(zip(names, row, strict=True))
            reason = values.pop("reason")
            found.append(Rescuable(reason=reason, job=ClaimedJob(**values)))
    return RescueScan(found, RescueCursor(*cutoffs))


def notify_cancel(attempts: Sequence[tuple[int, int]]) -> Statement[None]:
    """Tell every worker that these attempts were closed, so their owner raises the cancel flag
    (delivered when the transaction commits)."""
    return Statement(
        sql=_SQL["notify_cancel"],
        params={"attempts": [f"{job}:{lease}" for job, lease in attempts]},
        read=nothing,
    )
