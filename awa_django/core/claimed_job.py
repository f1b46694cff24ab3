"""A claimed job, and the row maker the claim statements build it with."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Final


# Not frozen, like Completion: one is built per claimed job, and a frozen dataclass's __init__
# (one object.__setattr__ per field) made a no-op drain measurably slower (docs/benchmarks.md).
# Nothing mutates them.
# Positional: the claim's row maker builds one from each row's values in column order.
@dataclass(slots=True)
class ClaimedJob:
    """A job claimed by this worker, with the lease every later write must carry."""

    queue: str
    priority: int
    shard: int
    lane_seq: int
    ready_slot: int
    job_id: int
    kind: str
    args: dict[str, Any]
    attempt: int
    run_lease: int
    max_attempts: int
    run_at: datetime
    created_at: datetime
    metadata: dict[str, Any]
    tags: list[str]
    errors: list[Any]
    # Saved by earlier attempts of this job (None when there is none).
    progress: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None
    # When the claim that returned the job took it, on the database's clock (its receipt's
    # claimed_at); None from the statements that find an attempt already under way (rescue,
    # callbacks).
    claimed_at: datetime | None = None


CLAIMED_JOB_COLUMNS: Final = tuple(field.name for field in fields(ClaimedJob))


def _claimed_job(values: Sequence[Any]) -> ClaimedJob:
    return ClaimedJob(*values)


def claimed_job_rows(names: tuple[str, ...]) -> Callable[[Sequence[Any]], ClaimedJob]:
    """The row maker (``storage.statement.RowsOf``) the statements that return attempts are
    given: each row a ``ClaimedJob``, built from the values in column order. Going through a
    keyword dict per row (``class_row``) cost the claim time per job, on the path between the
    claim's reply and the handlers' start. The columns are checked once per result, so a
    statement out of step fails loudly."""
    if names != CLAIMED_JOB_COLUMNS:
        raise ValueError(
            f"a statement returning attempts gave the columns {names}, "
            f"expected {CLAIMED_JOB_COLUMNS}"
        )
    return _claimed_job
