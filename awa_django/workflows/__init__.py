"""Durable workflows: named steps with dependencies, enqueued in one call inside the caller's
transaction, each step an ordinary job released by the transaction that ends its last
dependency (docs/workflows.md).

``Workflow`` is a frozen builder: every ``step`` returns a new one, so a partly built workflow
can be shared and extended. ``chain``, ``group`` and ``chord`` build the usual shapes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import partial
from typing import Any, Final, Unpack, cast

from asgiref.sync import sync_to_async
from django.db import connections, transaction

from awa_django.conf import get_settings
from awa_django.eager import run_after_commit
from awa_django.enqueue import bind_args, resolve_job
from awa_django.enqueue_options import EnqueueOptionArgs, EnqueueOptions
from awa_django.exact_json import check_text, moved
from awa_django.exceptions import AwaError, InvalidJob
from awa_django.jobs import Job
from awa_django.migration_state import reported_unmigrated
from awa_django.priorities import STORED_PRIORITY_MAX, STORED_PRIORITY_MIN
from awa_django.step_context import ADDED_STEP_SEPARATOR, provide_step_spec
from awa_django.storage import workflows as storage
from awa_django.storage.jobs import get_jobs
from awa_django.storage.workflows import StepRow, WorkflowRow

__all__ = [
    "Call",
    "Step",
    "Workflow",
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
    "wait_workflow",
]

TERMINAL_STATES: Final = frozenset({"completed", "failed", "cancelled"})
_MAX_STEPS: Final = 100_000


class WorkflowTimeout(AwaError, TimeoutError):
    """``wait_workflow`` gave up before the workflow finished."""


# What a step runs: an ``@awa.job``, a kind, or a ``django.tasks`` Task of awa's backend (not
# named in the annotation: django.tasks may be missing, and its backport is a separate package).
StepJob = str | Job[Any, Any] | object


@dataclass(frozen=True, slots=True)
class Call:
    """A job with its arguments and options, not yet a named step: what ``chain``, ``group``
    and ``chord`` take (``awa.call(send_mail, to="a@b")``). A ``django.tasks`` Task takes its
    keyword arguments the same way."""

    job: StepJob
    args: Mapping[str, Any] | None = None
    options: EnqueueOptions = field(default_factory=EnqueueOptions)


def call(job: StepJob, /, **args: Any) -> Call:
    """``job`` called with ``args`` (keyword arguments of its handler), to be a step."""
    return Call(job, args)


@dataclass(frozen=True, slots=True)
class Step:
    """One named step: its job, arguments, options, and the steps it waits for. A dependency
    named in ``ignore`` lets the step run even when that one fails or is cancelled."""

    name: str
    call: Call
    after: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    on_failure: bool = False


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


@dataclass(frozen=True, slots=True)
class Workflow:
    """A graph of named steps, built one ``step`` at a time and enqueued in one call.

    ``Workflow("import").step("fetch", fetch, url=u).step("parse", parse, after=["fetch"])``
    """

    name: str = "workflow"
    steps: tuple[Step, ...] = ()
    failure_step: Step | None = None

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
    ) -> Workflow:
        """This workflow with one more step: ``job`` (an ``@awa.job``, a kind, or a ``Call``)
        called with ``args``, run once every step in ``after`` completed. Enqueue options
        (queue, priority, max_attempts, metadata, tags) apply to this step."""
        return replace(
            self, steps=(*self.steps, _step(name, job, args, after, ignore, options, changes))
        )

    def on_failure(
        self,
        name: str,
        job: StepJob | Call,
        /,
        *,
        args: Mapping[str, Any] | None = None,
        options: EnqueueOptions | None = None,
        **changes: Unpack[EnqueueOptionArgs],
    ) -> Workflow:
        """This workflow with a step that runs once, after every other step ended, when any
        of them failed or was cancelled; it reads their errors from ``ctx.workflow.errors``.
        Not run when the workflow is cancelled."""
        made = _step(name, job, args, (), (), options, changes)
        return replace(self, failure_step=replace(made, on_failure=True))

    def _all_steps(self) -> tuple[Step, ...]:
        return self.steps if self.failure_step is None else (*self.steps, self.failure_step)

    def spec(self) -> dict[str, Any]:
        """The workflow as ``awa.workflow_create`` reads it, every step validated: names,
        dependencies (unknown, cyclic), arguments and options. Raises ``InvalidJob`` naming
        the step; nothing is written."""
        check_text(self.name, field="name")
        steps = self._all_steps()
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
        for step in self.steps:
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
        _check_acyclic(self.steps)
        return {"name": self.name, "steps": [_step_spec(step) for step in steps]}

    def enqueue(self) -> WorkflowRun:
        """Validate, then write the workflow in the current transaction of
        ``AWA["DATABASE_ALIAS"]``: it commits or rolls back with the caller's rows. The steps
        without dependencies are runnable once it commits."""
        spec_json = json.dumps(self.spec())
        alias = get_settings().DATABASE_ALIAS
        with reported_unmigrated(alias), connections[alias].cursor() as cursor:
            workflow_id, job_ids = storage.create_workflow(cursor, spec_json)
        run = WorkflowRun(workflow_id, job_ids)
        if _runs_eagerly(self):
            transaction.on_commit(partial(_run_eagerly, workflow_id), using=alias)
        return run

    def enqueue_on_commit(self, *, using: str | None = None) -> PendingWorkflow:
        """Validate now and enqueue once the current transaction of ``using`` (Django's
        default alias when None) commits; the ``PendingWorkflow`` learns the run then."""
        self.spec()
        pending = PendingWorkflow()

        def at_commit() -> None:
            pending.run = self.enqueue()

        transaction.on_commit(at_commit, using=using)
        return pending


@dataclass(slots=True)
class PendingWorkflow:
    """A workflow to be enqueued at commit; ``run`` is set then."""

    run: WorkflowRun | None = None


def _step(
    name: str,
    job: StepJob | Call,
    args: Mapping[str, Any] | None,
    after: Sequence[str],
    ignore: Sequence[str],
    options: EnqueueOptions | None,
    changes: EnqueueOptionArgs,
) -> Step:
    if isinstance(after, str) or isinstance(ignore, str):
        raise InvalidJob(
            f"steps.{name}.after: after and ignore take a list of step names",
            field=f"steps.{name}.after",
        )
    made = job if isinstance(job, Call) else Call(job, args)
    if isinstance(job, Call) and args is not None:
        made = replace(made, args={**(job.args or {}), **args})
    merged = (options or made.options).using(**changes)
    return Step(name, replace(made, options=merged), tuple(after), tuple(ignore))


def _check_acyclic(steps: Sequence[Step]) -> None:
    waiting = {step.name: len(step.after) for step in steps}
    dependents: dict[str, list[str]] = {}
    for step in steps:
        for dep in step.after:
            dependents.setdefault(dep, []).append(step.name)
    ready = [name for name, count in waiting.items() if count == 0]
    while ready:
        name = ready.pop()
        for dependent in dependents.get(name, ()):
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                ready.append(dependent)
    stuck = [step.name for step in steps if waiting[step.name] > 0]
    if stuck:
        raise InvalidJob(
            f"steps.{stuck[0]}.after: the dependencies form a cycle (through "
            f"{', '.join(repr(name) for name in stuck[:5])})",
            field=f"steps.{stuck[0]}.after",
        )


def _is_task(job: object) -> bool:
    return hasattr(job, "module_path") and hasattr(job, "get_backend")


def _task_job(call: Call) -> tuple[str, Mapping[str, Any], EnqueueOptions]:
    """The awa job of a ``django.tasks`` Task step, as awa's backend would enqueue it, with the
    step's own options on top."""
    task: Any = call.job
    backend = task.get_backend()
    job_of = getattr(backend, "job_of", None)
    if job_of is None:
        raise InvalidJob(
            f"job: a django.tasks Task is a step only on awa's backend "
            f"(awa_django.tasks.AwaBackend), not {type(backend).__name__}",
            field="job",
        )
    if task.run_after is not None:
        raise InvalidJob("run_after: a step runs when its dependencies allow", field="run_after")
    kind, job_args, options = job_of(task, [], dict(call.args or {}), run_after=None)
    given = {f.name: getattr(call.options, f.name) for f in fields(call.options)}
    return kind, job_args, options.using(**{k: v for k, v in given.items() if v is not None})


def _step_spec(step: Step) -> dict[str, Any]:
    prefix = f"steps.{step.name}"
    try:
        priorities: dict[str, Any] = {}
        if _is_task(step.call.job):
            kind_name, task_args, options = _task_job(step.call)
            kind, job = resolve_job(kind_name)
            try:
                bound = bind_args(kind, job, task_args)
            except InvalidJob as refusal:
                # Stored as {"args": [], "kwargs": {...}}: named as the step's args were given.
                raise moved(refusal, "args.kwargs", "args") from None
            # Django's -100..100 priorities are stored past awa's native 1..4.
            priorities["priority_range"] = (STORED_PRIORITY_MIN, STORED_PRIORITY_MAX)
        elif isinstance(step.call.job, str | Job):
            kind, job = resolve_job(step.call.job)
            bound = bind_args(kind, job, step.call.args)
            options = step.call.options
        else:
            raise InvalidJob(
                f"job: a step runs an @awa.job, a kind or a django.tasks Task, "
                f"got {step.call.job!r}",
                field="job",
            )
        if options.run_at is not None:
            raise InvalidJob("run_at: a step runs when its dependencies allow", field="run_at")
        if options.unique is not None or (job is not None and job.unique is not None):
            raise InvalidJob("unique: steps cannot be unique jobs", field="unique")
        resolved = options.using(unique=None).resolve(kind, job, **priorities)
    except InvalidJob as refusal:
        # The refusal's message starts with its field, so the step's name goes in front.
        if refusal.field:
            raise InvalidJob(f"{prefix}.{refusal}", field=f"{prefix}.{refusal.field}") from None
        raise InvalidJob(f"{prefix}: {refusal}", field=prefix) from None
    return {
        "name": step.name,
        "kind": resolved.kind,
        "queue": resolved.queue,
        "priority": resolved.priority,
        "args": json.loads(bound.json),
        "max_attempts": resolved.max_attempts,
        "metadata": json.loads(resolved.metadata_json),
        "tags": list(resolved.tags),
        "after": list(step.after),
        "ignore": list(step.ignore),
        "on_failure": step.on_failure,
    }


def _added_spec(
    name: str,
    job: object,
    args: Mapping[str, Any] | None,
    after: Sequence[str],
    options: Mapping[str, Any],
) -> dict[str, Any]:
    """A step added while its workflow runs (``ctx.workflow.add``), validated as ``Workflow``
    validates its steps; ``options["_known"]`` holds the names the same step added before."""
    changes = dict(options)
    known: set[str] = changes.pop("_known")
    leaf = name.split(ADDED_STEP_SEPARATOR, 1)[1]
    if not leaf or ADDED_STEP_SEPARATOR in leaf:
        raise InvalidJob(
            f"steps.{name}: an added step's name must be non-empty text without "
            f"{ADDED_STEP_SEPARATOR!r}",
            field=f"steps.{name}",
        )
    check_text(leaf, field=f"steps.{name}")
    if name in known:
        raise InvalidJob(f"steps.{name}: two steps are named {name!r}", field=f"steps.{name}")
    for dep in after:
        if dep not in known:
            raise InvalidJob(
                f"steps.{name}.after: unknown step {dep!r} (a step added while the workflow "
                "runs waits for the step that added it, and for steps that one added before)",
                field=f"steps.{name}.after",
            )
    return _step_spec(_step(name, job, args, after, (), None, cast(EnqueueOptionArgs, changes)))


provide_step_spec(_added_spec)


def chain(*calls: StepJob | Call, name: str = "chain") -> Workflow:
    """Steps ``"1"``, ``"2"``, ... run one after the other; each reads the one before's result
    as ``ctx.workflow.previous``. A failure cancels the rest."""
    workflow = Workflow(name)
    for position, made in enumerate(calls, start=1):
        after = [str(position - 1)] if position > 1 else []
        workflow = workflow.step(str(position), made, after=after)
    return workflow


def group(*calls: StepJob | Call, name: str = "group") -> Workflow:
    """Steps ``"1"``, ``"2"``, ... that run independently of one another."""
    workflow = Workflow(name)
    for position, made in enumerate(calls, start=1):
        workflow = workflow.step(str(position), made)
    return workflow


def chord(
    header: Workflow | Sequence[StepJob | Call],
    callback: StepJob | Call,
    *,
    name: str = "chord",
    step_name: str = "callback",
) -> Workflow:
    """A group and a callback step that runs once every member completed, reading their
    results in order as ``ctx.workflow.result_list``. By default a member's failure cancels
    the callback (use ``Workflow.step(..., ignore=...)`` to run it anyway)."""
    members = header if isinstance(header, Workflow) else group(*header, name=name)
    return replace(members, name=name).step(
        step_name, callback, after=[step.name for step in members.steps]
    )


def _runs_eagerly(workflow: Workflow) -> bool:
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
            steps = storage.workflow_steps(cursor, workflow_id)
            jobs = {record.job_id: record for record in get_jobs(cursor, [s.job_id for s in steps])}
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
        row = storage.get_workflow(cursor, workflow_id)
        if row is None:
            return None
        return WorkflowState(row, tuple(storage.workflow_steps(cursor, workflow_id)))


def list_workflows(
    *, state: str | None = None, name: str | None = None, limit: int = 50
) -> list[WorkflowRow]:
    """Workflows newest first, of one state (running, completed, failed, cancelled) and name
    when given; an unknown state raises ``ValueError``."""
    if state is not None and state not in {"running", *TERMINAL_STATES}:
        raise ValueError(f"unknown workflow state {state!r}")
    alias = get_settings().DATABASE_ALIAS
    with connections[alias].cursor() as cursor:
        return storage.list_workflows(cursor, state=state, name=name, limit=limit)


def cancel_workflow(workflow_id: int, *, reason: str = "workflow cancelled") -> int | None:
    """Cancel every step of the workflow that has not ended (a running step sees
    ``ctx.is_cancelled()``); it then ends ``cancelled`` without running its ``on_failure``
    step. Returns how many steps were cancelled, or None when it was not running."""
    check_text(reason, field="reason")
    alias = get_settings().DATABASE_ALIAS
    with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
        return storage.cancel_workflow(cursor, workflow_id, reason)


def wait_workflow(workflow_id: int, *, timeout: float) -> WorkflowState:
    """Block until the workflow has finished and return it; ``WorkflowTimeout`` after
    ``timeout`` seconds. Reads committed state, so call it outside the transaction that
    enqueued the workflow."""
    deadline = time.monotonic() + timeout
    pause = 0.01
    while True:
        state = get_workflow(workflow_id)
        if state is None:
            raise LookupError(f"no workflow {workflow_id}")
        if state.finished:
            return state
        left = deadline - time.monotonic()
        if left <= 0:
            raise WorkflowTimeout(
                f"workflow {workflow_id} is still {state.state} after {timeout}s: {state.counts}"
            )
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.5)


async def await_workflow(workflow_id: int, *, timeout: float) -> WorkflowState:
    """``wait_workflow`` for async code."""
    return await sync_to_async(wait_workflow, thread_sensitive=False)(workflow_id, timeout=timeout)
