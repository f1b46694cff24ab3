"""A workflow's steps as declared: what each runs, with which arguments and options, after which
steps, and the description of each that the database stores (``awa.workflow_create``), checked
before anything is written. Also what validates a step a running step adds
(``ctx.workflow.add``): the worker hands ``added_step_spec`` to each attempt's context.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from typing import Any, cast

from awa_django.conf import PRIORITY_MAX, PRIORITY_MIN
from awa_django.declarations.enqueue_options import (
    NO_OPTIONS,
    EnqueueOptionArgs,
    EnqueueOptions,
    ResolvedOptions,
    capture_trace_context,
)
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
    # Frozen, so one value serves every call that gives no options.
    options: EnqueueOptions = NO_OPTIONS


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
    if merged is not made.options:
        made = replace(made, options=merged)
    return Step(name, made, tuple(after), tuple(ignore))


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
    JSON text they were encoded to once. Steps that run the same job with the same options
    share their ``options`` and ``options_json``."""

    step: Step
    options: ResolvedOptions
    # The options as members of the step's JSON description (kind, queue, priority,
    # max_attempts, metadata, tags).
    options_json: str
    args_json: str

    def spec(self) -> dict[str, Any]:
        """The step's description as ``awa.workflow_graft`` reads it (an added step)."""
        options = self.options
        return {
            "name": self.step.name,
            "kind": options.kind,
            "queue": options.queue,
            "priority": options.priority,
            "args": json.loads(self.args_json),
            "max_attempts": options.max_attempts,
            "metadata": json.loads(options.metadata_json),
            "tags": list(options.tags),
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
            f'{{"name":{_quoted(step.name)},"args":{self.args_json},'
            f"{self.options_json},"
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


class StepResolver:
    """Validates and resolves the steps of one workflow. What its steps share is worked out
    once for all of them (#34): the enqueue site's trace context, the handler of each kind,
    and the options of each distinct job and options (every member of a group, say); each
    step's arguments are bound and encoded on their own."""

    def __init__(self) -> None:
        self._trace_context = capture_trace_context()
        self._options: dict[Hashable, tuple[ResolvedOptions, str]] = {}
        # Each kind or job the steps run, looked up in the registry once.
        self._jobs: dict[str | DeclaredJob[Any, Any], tuple[str, DeclaredJob[Any, Any] | None]] = {}

    def resolve(self, step: Step) -> ResolvedStep:
        prefix = f"steps.{step.name}"
        try:
            return self._resolve(step)
        except InvalidJob as refusal:
            # The refusal's message starts with its field, so the step's name goes in front.
            if refusal.field:
                raise InvalidJob(f"{prefix}.{refusal}", field=f"{prefix}.{refusal.field}") from None
            raise InvalidJob(f"{prefix}: {refusal}", field=prefix) from None

    def _resolve(self, step: Step) -> ResolvedStep:
        priority_range = (PRIORITY_MIN, PRIORITY_MAX)
        job_or_kind = step.call.job
        if isinstance(job_or_kind, str | DeclaredJob):
            found = self._jobs.get(job_or_kind)
            if found is None:
                found = self._jobs[job_or_kind] = resolve_job(job_or_kind)
            kind, job = found
            bound = bind_args(kind, job, step.call.args)
            options = step.call.options
        elif is_task(job_or_kind):
            kind_name, task_args, options = task_job(step.call)
            kind, job = resolve_job(kind_name)
            try:
                bound = bind_args(kind, job, task_args)
            except InvalidJob as refusal:
                # Stored as {"args": [], "kwargs": {...}}: named as the step's args were given.
                raise moved(refusal, "args.kwargs", "args") from None
            # Django's -100..100 priorities are stored past awa's native 1..4.
            priority_range = (STORED_PRIORITY_MIN, STORED_PRIORITY_MAX)
        else:
            raise InvalidJob(
                f"job: a step runs an @awa.job, a kind or a django.tasks Task, got {job_or_kind!r}",
                field="job",
            )
        if options.run_at is not None:
            raise InvalidJob("run_at: a step runs when its dependencies allow", field="run_at")
        if options.unique is not None or (job is not None and job.unique is not None):
            raise InvalidJob("unique: steps cannot be unique jobs", field="unique")
        resolved, options_json = self._options_of(kind, job, options, priority_range)
        return ResolvedStep(step, resolved, options_json, bound.json)

    def _options_of(
        self,
        kind: str,
        job: DeclaredJob[Any, Any] | None,
        options: EnqueueOptions,
        priority_range: tuple[int, int],
    ) -> tuple[ResolvedOptions, str]:
        # Options are compared by value (a step's own EnqueueOptions is a new one even when
        # equal); the job by identity, which the steps keep alive while the workflow resolves.
        # Options holding a list or a dict cannot be compared that way: resolved each time.
        # The numbers' types are part of the key: True and 1.0 equal 1, but are refused.
        key: Hashable | None = (
            kind,
            id(job),
            options,
            type(options.priority),
            type(options.max_attempts),
            priority_range,
        )
        try:
            return self._options[key]
        except KeyError:
            pass
        except TypeError:
            key = None
        # Its unique is None (checked by the caller): no copy of the options to clear it.
        resolved = options.resolve(
            kind, job, priority_range=priority_range, trace_context=self._trace_context
        )
        found = (
            resolved,
            (
                f'"kind":{_quoted(resolved.kind)},"queue":{_quoted(resolved.queue)},'
                f'"priority":{int(resolved.priority)},"max_attempts":{int(resolved.max_attempts)},'
                f'"metadata":{resolved.metadata_json},"tags":{_names(resolved.tags)}'
            ),
        )
        if key is not None:
            self._options[key] = found
        return found


def step_spec(step: Step) -> dict[str, Any]:
    return StepResolver().resolve(step).spec()


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
