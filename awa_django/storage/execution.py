"""Execution plane: closing attempts with the run_lease guard."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from operator import attrgetter
from typing import Any, Final, Generic, Protocol

from psycopg.types.json import Jsonb

from awa_django.declarations.exact_json import exact_text
from awa_django.sql import queries
from awa_django.storage.queue import CLAIMED_JOB_JSON
from awa_django.storage.statement import J, RowsOf, Statement, all_rows, nothing
from awa_django.storage.workflows import FinishedWorkflow, finished_workflows

_SQL = queries("execution")

_ADDRESS_FIELDS: Final = (
    "ready_slot",
    "queue",
    "priority",
    "shard",
    "lane_seq",
    "job_id",
    "run_lease",
)


def receipt_address(item: ReceiptAddress) -> dict[str, Any]:
    """The fields that name an attempt's receipt (and so guard its writes), from a claimed job
    or any value carrying them."""
    return {name: getattr(item, name) for name in _ADDRESS_FIELDS}


def address_arrays(items: Sequence[ReceiptAddress]) -> dict[str, list[Any]]:
    """The receipt address of a batch as parallel arrays, the shape the SQL functions unnest."""
    return {name: [getattr(item, name) for item in items] for name in _ADDRESS_FIELDS}


class ReceiptAddress(Protocol):
    """The fields that name an attempt's receipt, and so guard its writes (a claimed job, its
    completion, its live attempt)."""

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


class CloseItem(ReceiptAddress, Protocol):
    """What the close statement reads of one attempt it closes (core's ``Completion``):
    ``outcome`` is the name awa.close_batch reads (``completed``, ``retryable``, ...)."""

    @property
    def outcome(self) -> str: ...
    @property
    def delay_s(self) -> float | None: ...
    @property
    def error(self) -> dict[str, Any] | None: ...
    @property
    def progress(self) -> dict[str, Any] | None: ...
    @property
    def checkpoint(self) -> dict[str, Any] | None: ...
    @property
    def result_json(self) -> str | None: ...
    @property
    def workflow(self) -> bool: ...
    @property
    def workflow_id(self) -> int | None: ...
    @property
    def added_steps_json(self) -> str | None: ...


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
    def of(cls, job: ReceiptAddress, **details: Any) -> LiveAttempt:
        """``job``'s running attempt, addressed by its receipt."""
        return cls(
            **receipt_address(job),
            **details,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Rescuable(Generic[J]):
    """An open attempt the leader must rescue, and why ('heartbeat' or 'callback_timeout')."""

    reason: str
    job: J


def _json_or_none(value: dict[str, Any] | None) -> Jsonb | None:
    return None if value is None else Jsonb(value, dumps=exact_text)


class Closed(dict[tuple[int, int], datetime | None]):
    """The attempts a close statement closed, (job_id, run_lease), each with when its job runs
    again (retried or snoozed; None otherwise); and ``finished``, the workflows it finished
    (only a batch holding workflow steps can finish one)."""

    __slots__ = ("finished",)

    def __init__(
        self,
        closed: Mapping[tuple[int, int], datetime | None] | None = None,
        finished: Sequence[FinishedWorkflow] = (),
    ) -> None:
        super().__init__(closed or {})
        self.finished = list(finished)

    def merge(self, other: Closed) -> None:
        """Add what another statement closed and finished."""
        self.update(other)
        self.finished += other.finished


def _closed(rows: list[tuple[Any, ...]]) -> Closed:
    return Closed({(int(job_id), int(lease)): run_at for job_id, lease, run_at in rows})


def _closed_and_finished(rows: list[tuple[Any, ...]]) -> Closed:
    return Closed(
        {(int(job_id), int(lease)): run_at for job_id, lease, run_at, _ in rows},
        finished_workflows(rows[0][3] if rows else None),
    )


# Whether a completion is a workflow step's, read without a Python call per item.
_IS_STEP: Final = attrgetter("workflow")


def close_attempts(completions: Sequence[CloseItem]) -> Statement[Closed]:
    """Write a batch of completions in one statement; answers the attempts that closed.
    Anything missing was stale: an older lease, or an attempt closed by someone else.

    A batch holding workflow steps also reads the workflows the statement finished (so that
    ``workflow_finished`` is sent once, by the closer that finished each); other batches run
    the plain statement and pay nothing for it."""
    if any(map(_IS_STEP, completions)):
        return Statement(
            sql=_SQL["close_workflow_attempts"],
            params=close_params(completions),
            read=_closed_and_finished,
        )
    return Statement(sql=_SQL["close_attempts"], params=close_params(completions), read=_closed)


def close_params(completions: Sequence[CloseItem]) -> dict[str, str]:
    """The parameters of the close statement: the batch as one JSON array, in the shape
    awa.close_attempts reads; a key that is missing reads as NULL there."""
    # map, not a generator: a generator's step per item is a Python call of its own.
    return {"batch": "[" + ",".join(map(_close_item, completions)) + "]"}


# JSON string literals of queue names (a worker serves a handful; bounded by the cap below).
_QUEUE_LITERALS: dict[str, str] = {}
_QUEUE_LITERALS_MAX: Final = 1024


def _close_item(c: CloseItem) -> str:
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
        and c.added_steps_json is None
    ):
        # ``in`` and a subscript, not ``get``: no call for a queue seen before.
        if c.queue in _QUEUE_LITERALS:
            queue = _QUEUE_LITERALS[c.queue]
        else:
            queue = json.dumps(c.queue)
            if len(_QUEUE_LITERALS) < _QUEUE_LITERALS_MAX:
                _QUEUE_LITERALS[c.queue] = queue
        return (
            f'{{"ready_slot":{c.ready_slot:d},"queue":{queue},"priority":{c.priority:d},'
            f'"shard":{c.shard:d},"lane_seq":{c.lane_seq:d},"job_id":{c.job_id:d},'
            f'"run_lease":{c.run_lease:d},"outcome":"{c.outcome}"'
            # A workflow step's flag: awa.close_batch looks for it before any workflow work.
            + (_step_fields(c) if c.workflow else "}")
        )
    details = {
        "delay_s": c.delay_s,
        "error": c.error,
        "progress": c.progress,
        "checkpoint": c.checkpoint,
        # Already serialized (and size-checked) by the executor: sent as text.
        "result": c.result_json,
        # Workflow steps the attempt added, as JSON text (awa.workflow_graft).
        "wf_add": c.added_steps_json,
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
            "outcome": c.outcome,
            **({"wf": 1} if c.workflow else {}),
            **({"wf_id": c.workflow_id} if c.workflow_id is not None else {}),
            **{name: value for name, value in details.items() if value is not None},
        }
    )


def _step_fields(c: CloseItem) -> str:
    # Its workflow's id, when the step's metadata gave it, spares the close a lookup of the
    # step before it takes the workflow's lock.
    if c.workflow_id is None:
        return ',"wf":1}'
    return f',"wf":1,"wf_id":{c.workflow_id:d}}}'


def _open_attempts(rows: list[tuple[Any, ...]]) -> set[tuple[int, int]]:
    return {(int(job_id), int(lease)) for job_id, lease in rows}


def heartbeat_attempts(
    attempts: Sequence[LiveAttempt], *, claimed_by: str
) -> Statement[set[tuple[int, int]]]:
    """Heartbeat ``attempts`` and save their progress in one statement; answers the
    (job_id, run_lease) pairs still open. The rest were closed by rescue or cancel."""
    return Statement(
        sql=_SQL["heartbeat_attempts"],
        params={
            **address_arrays(attempts),
            "progress": [_json_or_none(a.progress) for a in attempts],
            "checkpoint": [_json_or_none(a.checkpoint) for a in attempts],
            "claimed_by": claimed_by,
        },
        read=_open_attempts,
    )


@dataclass(frozen=True, slots=True)
class RescueCursor:
    """Where the next rescue pass starts looking: every lease-less receipt claimed before
    ``claimed_after`` was seen by a complete pass."""

    claimed_after: datetime


def _rescue_cursor(rows: list[tuple[Any, ...]]) -> RescueCursor:
    ((claimed_before,),) = rows  # a SELECT without FROM returns its one row
    return RescueCursor(claimed_before)


def mark_rescued(cursor: RescueCursor) -> Statement[None]:
    """Record where a complete rescue pass leaves the next one, for the readers of the open
    attempts (``awa.rescue_marks``): the receipts claimed before it hold a lease or are closed."""
    return Statement(
        sql=_SQL["mark_rescued"], params={"claimed_before": cursor.claimed_after}, read=nothing
    )


# Cached: one row maker per attempt row maker, so the statement's psycopg row factory (cached by
# its row maker) is built once and not per pass.
@cache
def _rescuable_rows(job_rows: RowsOf[J]) -> RowsOf[Rescuable[J]]:
    def rows(names: tuple[str, ...]) -> Callable[[Sequence[Any]], Rescuable[J]]:
        # The first column is the reason, the others the attempt's.
        make = job_rows(names[1:])
        return lambda values: Rescuable(reason=values[0], job=make(values[1:]))

    return rows


def find_rescuable(
    *,
    rows: RowsOf[J],
    staleness_s: float,
    limit: int,
    since: RescueCursor | None = None,
) -> tuple[Statement[RescueCursor], Statement[list[Rescuable[J]]]]:
    """Open attempts silent for longer than ``staleness_s`` or past their callback timeout;
    ``since`` None looks at every retained receipt. ``rows`` makes each
    attempt from the columns of a claimed job (``core.claimed_job.claimed_job_rows``).

    Two statements the caller runs in order in one transaction, so that the first's answer,
    the cursor the next pass may start from, holds the very cutoffs the second's scan used
    (now() is the transaction's start)."""
    params = {
        "staleness_s": staleness_s,
        "limit": limit,
        "claimed_after": None if since is None else since.claimed_after,
    }
    return (
        Statement(sql=_SQL["rescue_cutoffs"], params=params, read=_rescue_cursor),
        Statement(
            sql=_SQL["find_rescuable"],
            params=params,
            read=all_rows,
            rows=_rescuable_rows(rows),
            json=CLAIMED_JOB_JSON,
        ),
    )


def notify_cancel(attempts: Sequence[tuple[int, int]]) -> Statement[None]:
    """Tell every worker that these attempts were closed, so their owner raises the cancel flag
    (delivered when the transaction commits)."""
    return Statement(
        sql=_SQL["notify_cancel"],
        params={"attempts": [f"{job}:{lease}" for job, lease in attempts]},
        read=nothing,
    )
