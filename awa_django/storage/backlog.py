"""Backlog plane: the deferred table of scheduled and retryable jobs, and its promotion. Every
function builds a ``Statement``, or a ``Copy`` for a batch (``copy_deferred``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from typing import Any

from awa_django.sql import queries
from awa_django.storage import copy_text
from awa_django.storage.copy_text import CopyBatch
from awa_django.storage.statement import Copy, Statement, first_int, first_value, ids

_SQL = queries("backlog")


def copy_deferred(batch: CopyBatch, args_json: Iterable[str]) -> Copy[list[int], list[int]]:
    """Add a batch of scheduled jobs with COPY; answers their ids in order."""
    return Copy(
        reserve=Statement(
            sql=_SQL["reserve_job_ids"], params={"count": batch.count}, read=first_value
        ),
        sql=_SQL["copy_deferred"],
        lines=partial(_deferred_lines, batch, args_json),
        answer=list,
    )


def _deferred_lines(
    batch: CopyBatch, args_json: Iterable[str], job_ids: list[int]
) -> Iterator[str]:
    # Columns in copy_deferred's order; only the id and the arguments vary by row.
    head = copy_text.fields("scheduled", batch.kind, batch.queue, batch.priority)
    tail = batch.tail()
    return (
        f"{job_id}\t{head}\t{copy_text.text_field(args)}\t{tail}\n"
        for job_id, args in zip(job_ids, args_json, strict=True)
    )


def promote_due(*, limit: int) -> tuple[Statement[int], Statement[int]]:
    """Move due scheduled, then retryable, jobs into the ready ring: two statements, each
    answering how many it moved (at most ``limit``). Every promoter (leader, burst, in-process)
    runs them in this order."""
    params = {"limit": limit}
    return (
        Statement(sql=_SQL["promote_due_scheduled"], params=params, read=first_int),
        Statement(sql=_SQL["promote_due_retryable"], params=params, read=first_int),
    )


def _seconds(rows: list[Any]) -> float | None:
    return None if not rows or rows[0][0] is None else float(rows[0][0])


def seconds_until_next_due(*, queues: Sequence[str]) -> Statement[float | None]:
    """Seconds until the earliest deferred job of ``queues`` is due, or None when there is none."""
    params = {"queues": list(queues)}
    return Statement(sql=_SQL["seconds_until_next_due"], params=params, read=_seconds)


def run_now(job_ids: Sequence[int]) -> Statement[list[int]]:
    """Make these scheduled or retryable jobs ready now, whatever their run_at; answers the ids
    moved (a job in another state, or held by a concurrent promotion or cancel, is not)."""
    return Statement(sql=_SQL["run_now"], params={"job_ids": list(job_ids)}, read=ids)


def _by_queue_and_kind(rows: list[Any]) -> dict[str, dict[str, int]]:
    found: dict[str, dict[str, int]] = {}
    for queue, kind, jobs in rows:
        found.setdefault(queue, {})[kind] = int(jobs)
    return found


KINDS_NOBODY_RUNS: Statement[dict[str, dict[str, int]]] = Statement(
    sql=_SQL["kinds_nobody_runs"], read=_by_queue_and_kind
)
"""Per queue, per kind: how many jobs wait for a worker that knows their kind."""
