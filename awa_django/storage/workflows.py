"""Durable workflows: the statements on ``awa.workflows``, ``awa.workflow_steps`` and their
functions (``sql/functions/workflows.sql``). Steps are released by ``awa.close_batch`` and
``awa.cancel_job`` themselves, inside the transaction that ends their last dependency."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from awa_django.sql import queries
from awa_django.storage.statement import Statement, first_int, nothing

_SQL = queries("workflows")

# Subscribes a waiter's session to the channel awa.workflow_finish notifies, with the id of the
# workflow that ended.
LISTEN_WORKFLOW_DONE: Final[Statement[None]] = Statement(
    sql=_SQL["listen_workflow_done"], read=nothing
)


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


def _finished(rows: list[Any]) -> list[FinishedWorkflow]:
    return finished_workflows(rows[0][0] if rows else None)


# The workflows the running transaction finished so far.
WORKFLOWS_FINISHED: Statement[list[FinishedWorkflow]] = Statement(
    sql=_SQL["workflows_finished"], read=_finished
)


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


def _waiting(rows: list[Any]) -> dict[int, WaitingOn]:
    return {int(job_id): WaitingOn(tuple(names), int(count)) for job_id, names, count in rows}


def waiting_on(job_ids: list[int]) -> Statement[dict[int, WaitingOn]]:
    """The steps each held step among ``job_ids`` still waits for; other jobs are left out.
    Callers skip it for no ids (it would answer an empty mapping)."""
    params = {"job_ids": job_ids, "shown": WAITING_SHOWN}
    return Statement(sql=_SQL["waiting_on"], params=params, read=_waiting)


def _created(rows: list[Any]) -> tuple[int, dict[str, int]]:
    return int(rows[0][0]), {str(step): int(job_id) for _, step, job_id in rows}


def create_workflow(spec_json: str) -> Statement[tuple[int, dict[str, int]]]:
    """Write a workflow (its JSON description, validated by the caller), in the running
    transaction; answers its id and each step's job id."""
    return Statement(sql=_SQL["create_workflow"], params={"spec": spec_json}, read=_created)


def _cancelled(rows: list[Any]) -> int | None:
    return None if not rows or rows[0][0] is None else int(rows[0][0])


def cancel_workflow(workflow_id: int, reason: str) -> Statement[int | None]:
    """Cancel a running workflow's unfinished steps; answers how many, None when it was not
    running."""
    params = {"workflow_id": workflow_id, "reason": reason}
    return Statement(sql=_SQL["cancel_workflow"], params=params, read=_cancelled)


def _workflow_rows(rows: list[Any]) -> list[WorkflowRow]:
    return [WorkflowRow(*row) for row in rows]


def _workflow_row(rows: list[Any]) -> WorkflowRow | None:
    return WorkflowRow(*rows[0]) if rows else None


def get_workflow(workflow_id: int) -> Statement[WorkflowRow | None]:
    params = {"workflow_id": workflow_id}
    return Statement(sql=_SQL["get_workflow"], params=params, read=_workflow_row)


def _steps(rows: list[Any]) -> list[StepRow]:
    return [
        StepRow(
            name=name,
            job_id=int(job_id),
            after=tuple(after),
            on_failure=bool(on_failure),
            state=state,
            result=result,
            error=error,
            released_at=released_at,
            finished_at=finished_at,
        )
        for name, job_id, after, on_failure, state, result, error, released_at, finished_at in rows
    ]


def workflow_steps(workflow_id: int) -> Statement[list[StepRow]]:
    return Statement(
        sql=_SQL["workflow_steps"],
        params={"workflow_id": workflow_id},
        read=_steps,
        json=("result", "error"),
    )


def list_workflows(
    *, state: str | None, name: str | None, limit: int
) -> Statement[list[WorkflowRow]]:
    params = {"state": state, "name": name, "limit": limit}
    return Statement(sql=_SQL["list_workflows"], params=params, read=_workflow_rows)


def prune_workflows(*, completed_s: float, failed_s: float, limit: int) -> Statement[int]:
    """Delete one bounded batch of finished workflows past their retention; answers how many
    went."""
    params = {"completed_s": completed_s, "failed_s": failed_s, "limit": limit}
    return Statement(sql=_SQL["prune_workflows"], params=params, read=first_int)


def _inputs(rows: list[Any]) -> tuple[tuple[str, ...], dict[str, dict[str, Any]]]:
    if not rows or rows[0][0] is None:
        return (), {}
    read = json.loads(rows[0][0])
    return tuple(read["after"]), dict(read["inputs"])


def step_inputs(
    workflow_id: int, step: str
) -> Statement[tuple[tuple[str, ...], dict[str, dict[str, Any]]]]:
    """A step's dependencies in order and each one's state, result and error: what a step
    whose release left them out of its metadata (a wide fan-in) reads when it runs."""
    params = {"workflow_id": workflow_id, "step": step}
    return Statement(sql=_SQL["step_inputs"], params=params, read=_inputs)
