"""Durable workflows: the statements on ``awa.workflows``, ``awa.workflow_steps`` and their
functions (``sql/functions/workflows.sql``). Steps are released by ``awa.close_batch`` and
``awa.cancel_job`` themselves, inside the transaction that ends their last dependency."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.db.backends.utils import CursorWrapper
from psycopg import AsyncConnection

from awa_django.sql import queries

_SQL = queries("workflows")

# The channel awa.workflow_finish notifies, with the id of the workflow that ended.
WORKFLOW_DONE_CHANNEL: Final = "awa_workflow_done"


@dataclass(frozen=True, slots=True)
class WorkflowRow:
    workflow_id: int
    name: str
    state: str
    steps: int
    unfinished: int
    failures: int
    cancel_reason: str | None
    created_at: datetime
    finished_at: datetime | None


@dataclass(frozen=True, slots=True)
class StepRow:
    name: str
    job_id: int
    after: tuple[str, ...]
    on_failure: bool
    state: str
    result: Any
    error: dict[str, Any] | None
    released_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True, slots=True)
class FinishedWorkflow:
    """A workflow that a close (or a cancel) brought to its terminal state."""

    workflow_id: int
    name: str
    state: str


def finished_workflows(text: str | None) -> list[FinishedWorkflow]:
    """The workflows named by the transaction setting awa.workflows_finished (JSON text)."""
    if not text:
        return []
    return [
        FinishedWorkflow(int(w["id"]), str(w["name"]), str(w["state"])) for w in json.loads(text)
    ]


def workflows_finished(cursor: CursorWrapper) -> list[FinishedWorkflow]:
    """The workflows the current transaction finished so far."""
    cursor.execute(_SQL["workflows_finished"])
    row = cursor.fetchone()
    return finished_workflows(None if row is None else row[0])


@dataclass(frozen=True, slots=True)
class WaitingOn:
    """The steps a held step still waits for: the first few names, and how many in all."""

    steps: tuple[str, ...]
    count: int

    def __str__(self) -> str:
        more = self.count - len(self.steps)
        return "waiting on " + ", ".join(self.steps) + (f" and {more} more" if more > 0 else "")


# How many names a WaitingOn spells out (a chord's callback may wait for thousands).
WAITING_SHOWN: Final = 5


def waiting_on(cursor: CursorWrapper, job_ids: list[int]) -> dict[int, WaitingOn]:
    """The steps each held step among ``job_ids`` still waits for; other jobs are left out."""
    if not job_ids:
        return {}
    cursor.execute(_SQL["waiting_on"], {"job_ids": job_ids, "shown": WAITING_SHOWN})
    return {int(job_id): WaitingOn(tuple(names), int(count)) for job_id, names, count in cursor}


def create_workflow(cursor: CursorWrapper, spec_json: str) -> tuple[int, dict[str, int]]:
    """Write a workflow (its JSON description, validated by the caller) in the current
    transaction; returns its id and each step's job id."""
    cursor.execute(_SQL["create_workflow"], {"spec": spec_json})
    rows = cursor.fetchall()
    return int(rows[0][0]), {str(step): int(job_id) for _, step, job_id in rows}


def cancel_workflow(cursor: CursorWrapper, workflow_id: int, reason: str) -> int | None:
    cursor.execute(_SQL["cancel_workflow"], {"workflow_id": workflow_id, "reason": reason})
    row = cursor.fetchone()
    return None if row is None or row[0] is None else int(row[0])


def _json(value: Any) -> Any:
    # Django's connection hands jsonb back as text.
    return json.loads(value) if isinstance(value, str) else value


def get_workflow(cursor: CursorWrapper, workflow_id: int) -> WorkflowRow | None:
    cursor.execute(_SQL["get_workflow"], {"workflow_id": workflow_id})
    row = cursor.fetchone()
    return None if row is None else WorkflowRow(*row)


def workflow_steps(cursor: CursorWrapper, workflow_id: int) -> list[StepRow]:
    cursor.execute(_SQL["workflow_steps"], {"workflow_id": workflow_id})
    return [
        StepRow(
            name=name,
            job_id=int(job_id),
            after=tuple(after),
            on_failure=bool(on_failure),
            state=state,
            result=_json(result),
            error=_json(error),
            released_at=released_at,
            finished_at=finished_at,
        )
        for name, job_id, after, on_failure, state, result, error, released_at, finished_at in (
            cursor.fetchall()
        )
    ]


def list_workflows(
    cursor: CursorWrapper, *, state: str | None, name: str | None, limit: int
) -> list[WorkflowRow]:
    cursor.execute(_SQL["list_workflows"], {"state": state, "name": name, "limit": limit})
    return [WorkflowRow(*row) for row in cursor.fetchall()]


async def prune_workflows(
    conn: AsyncConnection[Any], *, completed_s: float, failed_s: float, limit: int
) -> int:
    """Delete one bounded batch of finished workflows past their retention; how many went."""
    cursor = await conn.execute(
        _SQL["prune_workflows"], {"completed_s": completed_s, "failed_s": failed_s, "limit": limit}
    )
    row = await cursor.fetchone()
    return int(row[0]) if row else 0


def step_inputs(
    cursor: CursorWrapper, workflow_id: int, step: str
) -> tuple[tuple[str, ...], dict[str, dict[str, Any]]]:
    """A step's dependencies in order and each one's state, result and error: what a step
    whose release left them out of its metadata (a wide fan-in) reads when it runs."""
    cursor.execute(_SQL["step_inputs"], {"workflow_id": workflow_id, "step": step})
    row = cursor.fetchone()
    if row is None or row[0] is None:
        return (), {}
    read = json.loads(row[0])
    return tuple(read["after"]), dict(read["inputs"])
