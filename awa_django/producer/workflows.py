"""Durable workflows: named steps with dependencies, enqueued in one call inside the caller's
transaction, each step an ordinary job released by the transaction that ends its last
dependency (docs/workflows.md).

``WorkflowBuilder`` (``awa.Workflow``) is a frozen builder: every ``step`` returns a new one, so
a partly built workflow can be shared and extended. ``chain``, ``group`` and ``chord`` build the
usual shapes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Final, Unpack

from asgiref.sync import sync_to_async
from django.db import connections, transaction

from awa_django.conf import get_settings
from awa_django.declarations.enqueue_options import EnqueueOptionArgs, EnqueueOptions
from awa_django.declarations.exact_json import check_text
from awa_django.declarations.step_context import ADDED_STEP_SEPARATOR
from awa_django.declarations.workflow_steps import (
    Call,
    ResolvedStep,
    Step,
    StepJob,
    StepResolver,
    call,
    check_acyclic,
    make_step,
)
from awa_django.exceptions import AwaError, InvalidJob
from awa_django.ops.actions import announce_finished, retry
from awa_django.ops.job_waits import FALLBACK_POLL_S
from awa_django.producer.eager import run_after_commit
from awa_django.storage import workflows as storage
from awa_django.storage.connections import await_notification, listening
from awa_django.storage.jobs import jobs_by_id
from awa_django.storage.lanes import ensure_lanes
from awa_django.storage.migration_state import reported_unmigrated
from awa_django.storage.statement import run
from awa_django.storage.workflows import StepRow, WaitingOn, WorkflowRow

__all__ = [
    "Call",
    "Step",
    "WorkflowBuilder",
    "WorkflowRun",
    "WorkflowState",
    "WorkflowTimeout",
    "await_workflow",
    "call",
    "cancel_workflow",
    "chain",
    "chord",
    "get_workflow",
    "group",
    "list_workflows",
    "retry_refusal",
    "retry_workflow_step",
    "wait_workflow",
]

TERMINAL_STATES: Final = frozenset({"completed", "failed", "cancelled"})
# The step states a retry takes back (docs/workflows.md, "Retrying a failed step").
RETRYABLE_STEP_STATES: Final = frozenset({"failed", "dead_lettered"})
_MAX_STEPS: Final = 100_000


def _refuse_other_databases(steps: list[ResolvedStep]) -> None:
    """A workflow lives in ``AWA["DATABASE_ALIAS"]`` with its steps, whose closes release their
    dependents in one transaction: a step on a queue of another database is refused."""
    conf = get_settings()
    for step in steps:
        alias = conf.queue_database(step.options.queue)
        if alias != conf.DATABASE_ALIAS:
            field = f"steps.{step.step.name}.queue"
            raise InvalidJob(
                f"{field}: queue {step.options.queue!r} lives in database {alias!r}; a workflow's "
                f"steps must all use queues of AWA['DATABASE_ALIAS'] ({conf.DATABASE_ALIAS!r})",
                field=field,
            )


class WorkflowTimeout(AwaError, TimeoutError):
    """``wait_workflow`` gave up before the workflow finished."""


@dataclass(frozen=True, slots=True)
class WorkflowRun:
    """An enqueued workflow: its id and each step's job id."""

    workflow_id: int
    job_ids: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class WorkflowState:
    """A workflow as read back: its state (running, completed, failed, cancelled), its counts
    of steps per state, and each step (state, result, error, job id)."""

    workflow: WorkflowRow
    steps: tuple[StepRow, ...]

    @property
    def state(self) -> str:
        return self.workflow.state

    @property
    def finished(self) -> bool:
        return self.workflow.state in TERMINAL_STATES

    @property
    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for step in self.steps:
            counts[step.state] = counts.get(step.state, 0) + 1
        return counts

    def step(self, name: str) -> StepRow:
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(name)

    @property
    def results(self) -> dict[str, Any]:
        """The result of each step that completed, by name."""
        return {s.name: s.result for s in self.steps if s.state == "completed"}


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class _Added:
    """A step of a workflow linked to the steps before it: ``step`` makes one link and shares
    the rest with the workflow it extends, where copying them would make building a workflow
    one step at a time quadratic in its length."""

    step: Step
    before: _Added | None


@dataclass(frozen=True, slots=True, init=False, eq=False, repr=False)
class WorkflowBuilder:
    """A graph of named steps, built one ``step`` at a time and enqueued in one call.

    ``Workflow("import").step("fetch", fetch, url=u).step("parse", parse, after=["fetch"])``
    """

    name: str
    failure_step: Step | None
    # The last step added; None for a workflow without steps.
    _last: _Added | None

    def __init__(
        self, name: str = "workflow", steps: Iterable[Step] = (), failure_step: Step | None = None
    ) -> None:
        last = None
        for step in steps:
            last = _Added(step, last)
        self._set(name, last, failure_step)

    def _set(self, name: str, last: _Added | None, failure_step: Step | None) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "_last", last)
        object.__setattr__(self, "failure_step", failure_step)

    @staticmethod
    def _made(name: str, last: _Added | None, failure_step: Step | None) -> WorkflowBuilder:
        made = object.__new__(WorkflowBuilder)
        made._set(name, last, failure_step)
        return made

    @property
    def steps(self) -> tuple[Step, ...]:
        """The steps in the order they were added (the ``on_failure`` step apart)."""
        steps: list[Step] = []
        link = self._last
        while link is not None:
            steps.append(link.step)
            link = link.before
        steps.reverse()
        return tuple(steps)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WorkflowBuilder):
            return NotImplemented
        return (self.name, self.steps, self.failure_step) == (
            other.name,
            other.steps,
            other.failure_step,
        )

    def __hash__(self) -> int:
        return hash((self.name, self.steps, self.failure_step))

    def __reduce__(self) -> tuple[type[WorkflowBuilder], tuple[Any, ...]]:
        # Copied and pickled as its steps: following the links would recurse once per step.
        return (WorkflowBuilder, (self.name, self.steps, self.failure_step))

    def __repr__(self) -> str:
        return (
            f"WorkflowBuilder(name={self.name!r}, steps={self.steps!r}, "
            f"failure_step={self.failure_step!r})"
        )

    def step(
        self,
        name: str,
        job: StepJob | Call,
        /,
        *,
        args: Mapping[str, Any] | None = None,
        after: Sequence[str] = (),
        ignore: Sequence[str] = (),
        options: EnqueueOptions | None = None,
        **changes: Unpack[EnqueueOptionArgs],
    ) -> WorkflowBuilder:
        """This workflow with one more step: ``job`` (an ``@awa.job``, a kind, or a ``Call``)
        called with ``args``, run once every step in ``after`` completed. Enqueue options
        (queue, priority, max_attempts, metadata, tags) apply to this step."""
        made = make_step(name, job, args, after, ignore, options, changes)
        return self._made(self.name, _Added(made, self._last), self.failure_step)

    def on_failure(
        self,
        name: str,
        job: StepJob | Call,
        /,
        *,
        args: Mapping[str, Any] | None = None,
        options: EnqueueOptions | None = None,
        **changes: Unpack[EnqueueOptionArgs],
    ) -> WorkflowBuilder:
        """This workflow with a step that runs once, after every other step ended, when any
        of them failed or was cancelled; it reads their errors from ``ctx.workflow.errors``.
        Not run when the workflow is cancelled."""
        made = make_step(name, job, args, (), (), options, changes)
        return self._made(self.name, self._last, replace(made, on_failure=True))

    def spec(self) -> dict[str, Any]:
        """The workflow as ``awa.workflow_create`` reads it, every step validated: names,
        dependencies (unknown, cyclic), arguments and options. Raises ``InvalidJob`` naming
        the step; nothing is written."""
        return {"name": self.name, "steps": [step.spec() for step in self._resolved()]}

    def _resolved(self) -> list[ResolvedStep]:
        """Every step validated and resolved, in the order they were added."""
        check_text(self.name, field="name")
        added = self.steps
        steps = added if self.failure_step is None else (*added, self.failure_step)
        if not steps:
            raise InvalidJob("steps: a workflow needs at least one step", field="steps")
        if len(steps) > _MAX_STEPS:
            raise InvalidJob(f"steps: at most {_MAX_STEPS} steps per workflow", field="steps")
        names: set[str] = set()
        for step in steps:
            if not isinstance(step.name, str) or not step.name:
                raise InvalidJob(
                    f"steps: a step name must be a non-empty string, got {step.name!r}",
                    field="steps",
                )
            check_text(step.name, field=f"steps.{step.name}")
            if ADDED_STEP_SEPARATOR in step.name:
                raise InvalidJob(
                    f"steps.{step.name}: {ADDED_STEP_SEPARATOR!r} is kept for the names of "
                    "steps added while a workflow runs",
                    field=f"steps.{step.name}",
                )
            if step.name in names:
                raise InvalidJob(
                    f"steps.{step.name}: two steps are named {step.name!r}",
                    field=f"steps.{step.name}",
                )
            names.add(step.name)
        for step in added:
            for dep in step.after:
                if dep not in names or (
                    self.failure_step is not None and dep == self.failure_step.name
                ):
                    raise InvalidJob(
                        f"steps.{step.name}.after: unknown step {dep!r} (a step may only wait "
                        "for steps of its own workflow)",
                        field=f"steps.{step.name}.after",
                    )
            if len(set(step.after)) != len(step.after):
                raise InvalidJob(
                    f"steps.{step.name}.after: a dependency is named twice",
                    field=f"steps.{step.name}.after",
                )
            for dep in step.ignore:
                if dep not in step.after:
                    raise InvalidJob(
                        f"steps.{step.name}.ignore: {dep!r} is not one of its dependencies",
                        field=f"steps.{step.name}.ignore",
                    )
        check_acyclic(added)
        resolver = StepResolver()
        resolved = [resolver.resolve(step) for step in steps]
        _refuse_other_databases(resolved)
        return resolved

    def enqueue(self) -> WorkflowRun:
        """Validate, then write the workflow in the current transaction of
        ``AWA["DATABASE_ALIAS"]``: it commits or rolls back with the caller's rows. The steps
        without dependencies are runnable once it commits."""
        resolved = self._resolved()
        # JSON text put together from each step's texts (arguments and metadata are encoded
        # once, when they are validated), not a dict encoded again here.
        spec_json = (
            f'{{"name":{json.dumps(self.name)},"steps":['
            f"{','.join(step.spec_json() for step in resolved)}]}}"
        )
        alias = get_settings().DATABASE_ALIAS
        # Every step's lanes, not only the first steps': a later step is released in the
        # transaction that completes its last dependency, which need not create lanes either.
        lanes = {(step.options.queue, step.options.priority) for step in resolved}
        for queue, priority in sorted(lanes):
            ensure_lanes(alias, queue, priority)
        with reported_unmigrated(alias), connections[alias].cursor() as cursor:
            workflow_id, job_ids = run(cursor, storage.create_workflow(spec_json))
        started = WorkflowRun(workflow_id, job_ids)
        if _runs_eagerly(self):
            transaction.on_commit(partial(_run_eagerly, workflow_id), using=alias)
        return started

    def enqueue_on_commit(self, *, using: str | None = None) -> PendingWorkflow:
        """Validate now and enqueue once the current transaction of ``using`` (Django's
        default alias when None) commits; the ``PendingWorkflow`` learns the run then."""
        self._resolved()
        pending = PendingWorkflow()

        def at_commit() -> None:
            pending.run = self.enqueue()

        transaction.on_commit(at_commit, using=using)
        return pending


@dataclass(slots=True)
class PendingWorkflow:
    """A workflow to be enqueued at commit; ``run`` is set then."""

    run: WorkflowRun | None = None


def chain(*calls: StepJob | Call, name: str = "chain") -> WorkflowBuilder:
    """Steps ``"1"``, ``"2"``, ... run one after the other; each reads the one before's result
    as ``ctx.workflow.previous``. A failure cancels the rest."""
    return WorkflowBuilder(
        name,
        steps=tuple(
            make_step(
                str(position), made, None, [str(position - 1)] if position > 1 else [], (), None, {}
            )
            for position, made in enumerate(calls, start=1)
        ),
    )


def group(*calls: StepJob | Call, name: str = "group") -> WorkflowBuilder:
    """Steps ``"1"``, ``"2"``, ... that run independently of one another."""
    return WorkflowBuilder(
        name,
        steps=tuple(
            make_step(str(position), made, None, (), (), None, {})
            for position, made in enumerate(calls, start=1)
        ),
    )


def chord(
    header: WorkflowBuilder | Sequence[StepJob | Call],
    callback: StepJob | Call,
    *,
    name: str = "chord",
    step_name: str = "callback",
) -> WorkflowBuilder:
    """A group and a callback step that runs once every member completed, reading their
    results in order as ``ctx.workflow.result_list``. By default a member's failure cancels
    the callback (use ``Workflow.step(..., ignore=...)`` to run it anyway)."""
    members = header if isinstance(header, WorkflowBuilder) else group(*header, name=name)
    renamed = WorkflowBuilder._made(name, members._last, members.failure_step)
    return renamed.step(step_name, callback, after=[step.name for step in members.steps])


def _runs_eagerly(workflow: WorkflowBuilder) -> bool:
    eager = [step.call.options.eager for step in workflow.steps]
    if any(value is False for value in eager):
        return False
    return any(value is True for value in eager) or get_settings().EAGER


def _run_eagerly(workflow_id: int) -> None:
    """Eager mode: run the workflow's released steps here, one wave after another, until it
    has finished or nothing more is released (a step waiting to be retried)."""
    alias = get_settings().DATABASE_ALIAS
    done: set[int] = set()
    while True:
        with connections[alias].cursor() as cursor:
            steps = run(cursor, storage.workflow_steps(workflow_id))
            jobs = {
                record.job_id: record
                for record in run(cursor, jobs_by_id([s.job_id for s in steps]))
            }
        runnable = [
            jobs[s.job_id]
            for s in steps
            if s.state == "released"
            and s.job_id in jobs
            and jobs[s.job_id].state == "available"
            and s.job_id not in done
        ]
        if not runnable:
            return
        for record in runnable:
            done.add(record.job_id)
            # Runs at once (the workflow has committed): the runner claims these very jobs.
            run_after_commit(alias, record.queue, [record.job_id])


def get_workflow(workflow_id: int) -> WorkflowState | None:
    """A workflow's state, counts and steps, or None when there is no such workflow (never
    created, or reclaimed by retention after it finished)."""
    alias = get_settings().DATABASE_ALIAS
    with connections[alias].cursor() as cursor:
        row = run(cursor, storage.get_workflow(workflow_id))
        if row is None:
            return None
        return WorkflowState(row, tuple(run(cursor, storage.workflow_steps(workflow_id))))


def list_workflows(
    *, state: str | None = None, name: str | None = None, limit: int = 50
) -> list[WorkflowRow]:
    """Workflows newest first, of one state (running, completed, failed, cancelled) and name
    when given; an unknown state raises ``ValueError``."""
    if state is not None and state not in {"running", *TERMINAL_STATES}:
        raise ValueError(f"unknown workflow state {state!r}")
    alias = get_settings().DATABASE_ALIAS
    with connections[alias].cursor() as cursor:
        return run(cursor, storage.list_workflows(state=state, name=name, limit=limit))


def cancel_workflow(workflow_id: int, *, reason: str = "workflow cancelled") -> int | None:
    """Cancel every step of the workflow that has not ended (a running step sees
    ``ctx.is_cancelled()``); it then ends ``cancelled`` without running its ``on_failure``
    step. Returns how many steps were cancelled, or None when it was not running."""
    check_text(reason, field="reason")
    alias = get_settings().DATABASE_ALIAS
    with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
        cancelled = run(cursor, storage.cancel_workflow(workflow_id, reason))
        if cancelled is not None:
            announce_finished(cursor, alias)
        return cancelled


def retry_refusal(state: WorkflowState | None, step: str) -> str | None:
    """Why ``retry_workflow_step`` would refuse this step, or None when it would retry it."""
    if state is None:
        return "no such workflow (or retention reclaimed it)"
    if state.workflow.cancel_reason is not None:
        return "the workflow was cancelled"
    try:
        row = state.step(step)
    except KeyError:
        return f"the workflow has no step {step!r}"
    if row.on_failure:
        return f"step {step!r} is the on_failure step"
    if row.state not in RETRYABLE_STEP_STATES:
        return f"step {step!r} is {row.state}, not failed or dead_lettered"
    return None


def retry_workflow_step(workflow_id: int, step: str) -> bool:
    """Run a step that failed for good (or is held in the dead-letter queue) again, as a fresh
    attempt of the same job, and resume its workflow: it leaves its failed state, the steps
    cancelled because of this one wait again, and it ends once they have. Returns False when
    ``retry_refusal`` names a reason (no such step, not failed, the on_failure step, a
    cancelled workflow).

    ``awa.retry(job_id)`` of the step's job, and a retry from the dead-letter queue, resume the
    workflow the same way."""
    alias = get_settings().DATABASE_ALIAS
    with transaction.atomic(using=alias):
        state = get_workflow(workflow_id)
        if retry_refusal(state, step) is not None:
            return False
        assert state is not None
        return retry(state.step(step).job_id)


def waiting_on(job_ids: list[int]) -> dict[int, WaitingOn]:
    """For each held workflow step among ``job_ids``, the steps it still waits for (its
    ``str`` reads "waiting on fetch, parse"); other jobs are left out."""
    if not job_ids:
        return {}
    alias = get_settings().DATABASE_ALIAS
    with connections[alias].cursor() as cursor:
        return run(cursor, storage.waiting_on(job_ids))


def wait_workflow(workflow_id: int, *, timeout: float) -> WorkflowState:
    """Block until the workflow has finished and return it; ``WorkflowTimeout`` after
    ``timeout`` seconds. Reads committed state, so call it outside the transaction that
    enqueued the workflow."""
    deadline = time.monotonic() + timeout
    state = _finished_or_none(workflow_id, deadline, timeout)
    if state is not None:
        return state
    conf = get_settings()
    # A session of its own, as awa.wait's: AWA["WORKER_DATABASE"] when set (LISTEN needs one).
    alias = conf.WORKER_DATABASE or conf.DATABASE_ALIAS
    # Subscribed before the next read, so an end committed after it is heard; one that raced
    # the subscription, or a lost notification, is seen by the read every FALLBACK_POLL_S.
    with listening(alias, storage.LISTEN_WORKFLOW_DONE, application_name="awa_wait") as conn:
        while True:
            state = _finished_or_none(workflow_id, deadline, timeout)
            if state is not None:
                return state
            left = deadline - time.monotonic()
            await_notification(conn, str(workflow_id), min(left, FALLBACK_POLL_S))


def _finished_or_none(workflow_id: int, deadline: float, timeout: float) -> WorkflowState | None:
    """The workflow once it has finished, None while it runs; ``LookupError`` when there is no
    such workflow, ``WorkflowTimeout`` past the deadline."""
    state = get_workflow(workflow_id)
    if state is None:
        raise LookupError(f"no workflow {workflow_id}")
    if state.finished:
        return state
    if deadline - time.monotonic() <= 0:
        raise WorkflowTimeout(
            f"workflow {workflow_id} is still {state.state} after {timeout}s: {state.counts}"
        )
    return None


async def await_workflow(workflow_id: int, *, timeout: float) -> WorkflowState:
    """``wait_workflow`` for async code."""
    return await sync_to_async(wait_workflow, thread_sensitive=False)(workflow_id, timeout=timeout)
