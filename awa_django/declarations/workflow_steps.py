"""A workflow's steps as declared: what each runs, with which arguments and options, after which
steps, and the description of each that the database stores (``awa.workflow_create``), checked
before anything is written. Also what validates a step a running step adds
(``ctx.workflow.add``): the worker hands ``added_step_spec`` to each attempt's context.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from typing import Any, cast

from awa_django.declarations.enqueue_options import EnqueueOptionArgs, EnqueueOptions
from awa_django.declarations.exact_json import check_text, moved
from awa_django.declarations.jobs import DeclaredJob
from awa_django.declarations.priorities import STORED_PRIORITY_MAX, STORED_PRIORITY_MIN
from awa_django.declarations.resolve import bind_args, resolve_job
from awa_django.declarations.step_context import ADDED_STEP_SEPARATOR
from awa_django.exceptions import InvalidJob

# What a step runs: an ``@awa.job``, a kind, or a ``django.tasks`` Task of awa's backend (not
# named in the annotation: django.tasks may be missing, and its backport is a separate package).
StepJob = str | DeclaredJob[Any, Any] | object


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


def make_step(
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


def check_acyclic(steps: Sequence[Step]) -> None:
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


def is_task(job: object) -> bool:
    return hasattr(job, "module_path") and hasattr(job, "get_backend")


def task_job(call: Call) -> tuple[str, Mapping[str, Any], EnqueueOptions]:
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


@dataclass(frozen=True, slots=True)
class ResolvedStep:
    """A step validated: its job's options resolved and its arguments bound, each kept as the
    JSON text they were encoded to once."""

    step: Step
    kind: str
    queue: str
    priority: int
    max_attempts: int
    args_json: str
    metadata_json: str
    tags: tuple[str, ...]

    def spec(self) -> dict[str, Any]:
        """The step's description as ``awa.workflow_graft`` reads it (an added step)."""
        return {
            "name": self.step.name,
            "kind": self.kind,
            "queue": self.queue,
            "priority": self.priority,
            "args": json.loads(self.args_json),
            "max_attempts": self.max_attempts,
            "metadata": json.loads(self.metadata_json),
            "tags": list(self.tags),
            "after": list(self.step.after),
            "ignore": list(self.step.ignore),
            "on_failure": self.step.on_failure,
        }

    def spec_json(self) -> str:
        """The same description as JSON text, put together from the texts already encoded:
        a workflow's enqueue writes it without decoding and encoding each step's arguments
        and metadata again (#34)."""
        step = self.step
        return (
            f'{{"name":{_quoted(step.name)},"kind":{_quoted(self.kind)},'
            f'"queue":{_quoted(self.queue)},"priority":{int(self.priority)},'
            f'"args":{self.args_json},"max_attempts":{int(self.max_attempts)},'
            f'"metadata":{self.metadata_json},"tags":{_names(self.tags)},'
            f'"after":{_names(step.after)},"ignore":{_names(step.ignore)},'
            f'"on_failure":{"true" if step.on_failure else "false"}}}'
        )


_encode = json.JSONEncoder(ensure_ascii=True).encode


@lru_cache(maxsize=4096)
def _quoted_cached(text: str) -> str:
    return _encode(text)


def _quoted(text: str) -> str:
    # Kinds, queues and the names steps wait for repeat across a workflow's steps.
    return _quoted_cached(text) if len(text) <= 200 else _encode(text)


def _names(names: Sequence[str]) -> str:
    return f"[{','.join(_quoted(name) for name in names)}]" if names else "[]"


def step_spec(step: Step) -> dict[str, Any]:
    return resolve_step(step).spec()


def resolve_step(step: Step) -> ResolvedStep:
    prefix = f"steps.{step.name}"
    try:
        priorities: dict[str, Any] = {}
        if is_task(step.call.job):
            kind_name, task_args, options = task_job(step.call)
            kind, job = resolve_job(kind_name)
            try:
                bound = bind_args(kind, job, task_args)
            except InvalidJob as refusal:
                # Stored as {"args": [], "kwargs": {...}}: named as the step's args were given.
                raise moved(refusal, "args.kwargs", "args") from None
            # Django's -100..100 priorities are stored past awa's native 1..4.
            priorities["priority_range"] = (STORED_PRIORITY_MIN, STORED_PRIORITY_MAX)
        elif isinstance(step.call.job, str | DeclaredJob):
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
        # Its unique is None (checked above): no copy of the options to clear it.
        resolved = options.resolve(kind, job, **priorities)
    except InvalidJob as refusal:
        # The refusal's message starts with its field, so the step's name goes in front.
        if refusal.field:
            raise InvalidJob(f"{prefix}.{refusal}", field=f"{prefix}.{refusal.field}") from None
        raise InvalidJob(f"{prefix}: {refusal}", field=prefix) from None
    return ResolvedStep(
        step=step,
        kind=resolved.kind,
        queue=resolved.queue,
        priority=resolved.priority,
        max_attempts=resolved.max_attempts,
        args_json=bound.json,
        metadata_json=resolved.metadata_json,
        tags=tuple(resolved.tags),
    )


def added_step_spec(
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
    return step_spec(make_step(name, job, args, after, (), None, cast(EnqueueOptionArgs, changes)))
