"""Declaring jobs: the ``Job`` that ``@awa.job`` returns, ``JobContext`` and the registry.

A job is a plain function whose first parameter receives a ``JobContext``; the rest are its
arguments, passed by keyword and stored as JSON. ``@awa.job(...)`` (``producer.enqueue.job``,
above this module) registers it under a kind (``"<app_label>.<function>"`` unless given) and
gives it the functions behind ``.enqueue(**kwargs)`` (an ``Enqueuer``).
"""

from __future__ import annotations

import asyncio
import copy
import difflib
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import (
    Any,
    Concatenate,
    Final,
    Generic,
    ParamSpec,
    Protocol,
    TypeVar,
    Unpack,
)

from django.apps import apps

from awa_django.conf import MAX_ATTEMPTS_LIMIT, PRIORITY_MAX, PRIORITY_MIN
from awa_django.declarations.arguments import BoundArgs, bind_arguments, handler_parameters
from awa_django.declarations.enqueue_options import EnqueueOptionArgs, EnqueueOptions, RunAt
from awa_django.declarations.exact_json import storable_text, to_json_text
from awa_django.declarations.pending_job import PendingJob
from awa_django.declarations.priorities import TASK_KIND_PREFIX
from awa_django.declarations.step_context import (
    StepContext,
    StepInputs,
    StepInputsReader,
    StepSpec,
)
from awa_django.declarations.unique import Unique
from awa_django.exceptions import InvalidJob
from awa_django.job_record import WORKFLOW_KEY

P = ParamSpec("P")
DEFAULT_CALLBACK_TIMEOUT: Final = timedelta(hours=1)
R = TypeVar("R")
T = TypeVar("T")


class HandlerCallbacks(Protocol):
    """The worker's external callbacks of one attempt, as a handler's context uses them
    (``callbacks.waiting.AttemptCallbacks`` implements it; callbacks sit above this module)."""

    def run_sync(self, make: Callable[[], Coroutine[Any, Any, T]], *, async_name: str) -> T: ...

    async def register(self, timeout: timedelta | float) -> str: ...

    async def wait(self, token: str) -> Any: ...


class Enqueuer(Protocol):
    """The functions behind ``Job.enqueue``, ``enqueue_on_commit`` and ``enqueue_many``: the
    producer (``awa_django.producer.enqueue``, above this module) gives them to each job its
    ``@awa.job`` declares."""

    def enqueue(self, kind_or_job: DeclaredJob[Any, Any], *, args: Mapping[str, Any]) -> int: ...

    def enqueue_on_commit(
        self, kind_or_job: DeclaredJob[Any, Any], *, args: Mapping[str, Any]
    ) -> PendingJob: ...

    def enqueue_many(
        self,
        kind_or_job: DeclaredJob[Any, Any],
        args_list: Iterable[Mapping[str, Any]],
        *,
        run_at: RunAt,
    ) -> list[int]: ...


_PROGRESS_LOCK: Final = threading.Lock()


class AttemptProgress:
    """Progress and checkpoint of one attempt, shared between the handler's thread and the
    worker loop that flushes it with heartbeats."""

    def __init__(self, progress: dict[str, Any] | None, checkpoint: dict[str, Any] | None) -> None:
        # One lock for every attempt's progress: each holds it for a few assignments, rarely
        # (nearly every attempt reports none), and a lock of its own was a call per attempt.
        self._lock = _PROGRESS_LOCK
        self._progress = progress
        self._checkpoint = checkpoint
        self._dirty = False

    def update(self, progress: dict[str, Any], checkpoint: dict[str, Any] | None) -> None:
        with self._lock:
            self._progress = progress
            if checkpoint is not None:
                self._checkpoint = checkpoint
            self._dirty = True

    def read(self) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        with self._lock:
            return self._progress, self._checkpoint

    def take_unflushed(self) -> tuple[dict[str, Any] | None, dict[str, Any] | None, bool]:
        """The current values and whether they changed since the last call."""
        if not self._dirty:
            # Nearly every attempt saves nothing: no lock then. An update racing this read is
            # one that came just after it, and is taken by the next call.
            return self._progress, self._checkpoint, False
        with self._lock:
            dirty, self._dirty = self._dirty, False
            return self._progress, self._checkpoint, dirty

    def mark_unflushed(self) -> None:
        with self._lock:
            self._dirty = True


class CancelFlag:
    """Raised by the worker when an attempt must stop; the handler reads it from any thread.

    A plain attribute is enough (one store, one load, atomic in CPython); a threading.Event
    builds a Condition and a lock for every attempt, which showed in drain profiles."""

    __slots__ = ("raised",)

    def __init__(self) -> None:
        self.raised = False

    def set(self) -> None:
        self.raised = True


@dataclass(frozen=True, slots=True, kw_only=True)
class JobContext:
    """What a running handler knows about its attempt."""

    job_id: int
    kind: str
    queue: str
    priority: int
    attempt: int
    max_attempts: int
    run_lease: int
    args: Mapping[str, Any]
    metadata: Mapping[str, Any]
    tags: tuple[str, ...]
    created_at: datetime
    # This attempt's claim: the claiming worker's id and the time of the claim on the database's
    # clock, as its receipt records them; None outside a worker's or in-process claim
    # (``testing.perform``, a context built by hand).
    claimed_by: str | None = None
    claimed_at: datetime | None = None
    cancel_flag: CancelFlag = field(default_factory=CancelFlag, repr=False)
    state: AttemptProgress = field(default_factory=lambda: AttemptProgress(None, None), repr=False)
    # Set by the worker running the attempt; None outside a worker (callbacks need one).
    callbacks: HandlerCallbacks | None = field(default=None, repr=False)
    # Workflow steps this attempt added (``ctx.workflow.add``), written with its completion.
    workflow_added: list[dict[str, Any]] = field(default_factory=list, repr=False)
    # What validates a step this attempt adds (``declarations.workflow_steps.added_step_spec``),
    # set by whatever runs the attempt; None in a context built by hand.
    add_step: StepSpec | None = field(default=None, repr=False)
    # Reads a wide fan-in step's inputs (workflow id, step name) from the database, set by
    # whatever runs the attempt; what it read is kept in ``workflow_inputs`` for the attempt.
    read_workflow_inputs: StepInputsReader | None = field(default=None, repr=False)
    workflow_inputs: list[StepInputs] = field(default_factory=list, repr=False)

    def is_cancelled(self) -> bool:
        """True once the worker asks this attempt to stop: shutdown, cancel or rescue."""
        return self.cancel_flag.raised

    def set_progress(
        self, percent: float, message: str = "", *, checkpoint: Mapping[str, Any] | None = None
    ) -> None:
        """Report progress (0-100) and optionally save a checkpoint; both are written with the
        next heartbeat, kept across retries and rescues, and cleared when the job completes."""
        if isinstance(percent, bool) or not isinstance(percent, int | float):
            raise TypeError(f"percent must be a number, got {percent!r}")
        if not 0 <= percent <= 100:
            raise ValueError(f"percent must be between 0 and 100, got {percent!r}")
        saved = None
        if checkpoint is not None:
            to_json_text(dict(checkpoint), field="checkpoint")
            saved = dict(checkpoint)
        self.state.update({"percent": percent, "message": storable_text(str(message))}, saved)

    def _callbacks(self) -> HandlerCallbacks:
        if self.callbacks is None:
            raise RuntimeError("callbacks need the attempt to run in an awa worker")
        return self.callbacks

    def register_callback(self, timeout: timedelta | float = DEFAULT_CALLBACK_TIMEOUT) -> str:
        """Register a callback on this attempt and return its token: hand the token (or
        ``awa.callback_url(token)``) to the outside system, then ``return
        awa.WaitForCallback(token)`` to park, or ``ctx.wait_for_callback(token)`` to wait here.
        Unresolved after ``timeout``, the attempt is rescued (retried, or failed when out of
        attempts). A new registration replaces the attempt's earlier callback. Sync handlers
        only; async ones use ``aregister_callback``."""
        callbacks = self._callbacks()
        return callbacks.run_sync(
            lambda: callbacks.register(timeout), async_name="aregister_callback"
        )

    async def aregister_callback(
        self, timeout: timedelta | float = DEFAULT_CALLBACK_TIMEOUT
    ) -> str:
        """``register_callback`` for async handlers."""
        return await self._callbacks().register(timeout)

    async def wait_for_callback(self, token: str) -> Any:
        """Suspend until ``awa.resume_external(token, payload)`` and return its payload; the
        attempt keeps its worker slot and carries on. Raises ``StaleCallback`` if the attempt is
        closed meanwhile (external complete/fail/retry, callback timeout, cancel)."""
        return await self._callbacks().wait(token)

    def wait_for_callback_sync(self, token: str) -> Any:
        """``wait_for_callback`` for sync handlers."""
        callbacks = self._callbacks()
        return callbacks.run_sync(lambda: callbacks.wait(token), async_name="wait_for_callback")

    @property
    def workflow(self) -> StepContext | None:
        """This job's workflow step: its dependencies' results and errors
        (docs/workflows.md); None for a job that is not a step."""
        return StepContext.of(
            self.metadata, self.workflow_added, self.add_step, self._stored_workflow_inputs
        )

    def reads_workflow_inputs(self) -> bool:
        """Whether ``ctx.workflow`` of this step queries its inputs (a wide fan-in): an async
        handler's runner reads them first, off the event loop (``preload_workflow_inputs``)."""
        # Asked once per attempt: nearly every job is no workflow step, which ``in`` decides
        # without a call; the check against the abstract Mapping costs three.
        if WORKFLOW_KEY not in self.metadata:
            return False
        entry = self.metadata[WORKFLOW_KEY]
        return entry is not None and isinstance(entry, Mapping) and bool(entry.get("inputs_read"))

    def preload_workflow_inputs(self) -> None:
        if self.reads_workflow_inputs():
            self._stored_workflow_inputs()

    def _stored_workflow_inputs(self) -> StepInputs:
        if not self.workflow_inputs:
            if self.read_workflow_inputs is None:
                raise RuntimeError(
                    "ctx.workflow of a step with many dependencies reads them from the "
                    "database: the step must run in a worker or run_jobs"
                )
            entry = self.metadata[WORKFLOW_KEY]
            self.workflow_inputs.append(
                self.read_workflow_inputs(int(entry["id"]), str(entry["step"]))
            )
        return self.workflow_inputs[0]

    @property
    def progress(self) -> dict[str, Any] | None:
        """The latest progress: this attempt's, else the one an earlier attempt saved."""
        return self.state.read()[0]

    @property
    def checkpoint(self) -> dict[str, Any] | None:
        """The latest saved checkpoint (from this attempt or an earlier one), or None."""
        checkpoint = self.state.read()[1]
        return None if checkpoint is None else dict(checkpoint)


class AttemptContext(JobContext):
    """What the worker calls to build an attempt's ``JobContext``: what it returns is a plain
    ``JobContext`` (frozen, compared and printed as one built by the public constructor, with
    fresh cancel flag and workflow lists), built without the frozen dataclass's call to
    ``object.__setattr__`` per field and its default factories' calls (a visible share of a
    no-op job's worker CPU). Its ``__init__`` stores the slots directly, then makes the instance a
    ``JobContext``, whose slots and so whose layout are the same."""

    __slots__ = ()
    # The generic assignment and deletion, not JobContext's raising ones: with both generic
    # (they share one type slot), CPython stores each slot without a call.
    __setattr__ = object.__setattr__
    __delattr__ = object.__delattr__

    # Positional, in the fields' order: binding keywords cost more than the stores.
    def __init__(
        self,
        job_id: int,
        kind: str,
        queue: str,
        priority: int,
        attempt: int,
        max_attempts: int,
        run_lease: int,
        args: Mapping[str, Any],
        metadata: Mapping[str, Any],
        tags: tuple[str, ...],
        created_at: datetime,
        claimed_by: str | None,
        claimed_at: datetime | None,
        state: AttemptProgress,
        callbacks: HandlerCallbacks | None,
        add_step: StepSpec | None,
        read_workflow_inputs: StepInputsReader | None,
        /,
    ) -> None:
        # Typed as Any: the type checker holds JobContext's fields read-only, as they are once
        # the instance is one.
        this: Any = self
        this.job_id = job_id
        this.kind = kind
        this.queue = queue
        this.priority = priority
        this.attempt = attempt
        this.max_attempts = max_attempts
        this.run_lease = run_lease
        this.args = args
        this.metadata = metadata
        this.tags = tags
        this.created_at = created_at
        this.claimed_by = claimed_by
        this.claimed_at = claimed_at
        # Fresh for each attempt, as the public constructor's default factories give them.
        this.cancel_flag = CancelFlag()
        this.state = state
        this.callbacks = callbacks
        this.workflow_added = []
        this.add_step = add_step
        this.read_workflow_inputs = read_workflow_inputs
        this.workflow_inputs = []
        this.__class__ = JobContext


def _check_option(name: str, value: int | None, low: int, high: int) -> None:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high
    ):
        raise InvalidJob(
            f"@awa.job {name} must be an integer {low}..{high}, got {value!r}", field=name
        )


class DeclaredJob(Generic[P, R]):
    """A registered job handler. Calling it runs the function; ``enqueue`` schedules it."""

    def __init__(
        self,
        func: Callable[Concatenate[JobContext, P], R],
        *,
        kind: str | None,
        queue: str | None,
        priority: int | None,
        max_attempts: int | None,
        unique: Unique | None = None,
        description: str = "",
        owner: str = "",
        docs_url: str = "",
        enqueuer: Enqueuer | None = None,
    ) -> None:
        handler_parameters(func)  # fail at import time on a signature we cannot call
        _check_option("priority", priority, PRIORITY_MIN, PRIORITY_MAX)
        _check_option("max_attempts", max_attempts, 1, MAX_ATTEMPTS_LIMIT)
        if unique is not None and not isinstance(unique, Unique):
            raise InvalidJob(
                f"@awa.job unique must be an awa.Unique, got {unique!r}", field="unique"
            )
        for name, text in (("description", description), ("owner", owner), ("docs_url", docs_url)):
            if not isinstance(text, str):
                raise InvalidJob(f"@awa.job {name} must be a string, got {text!r}", field=name)
        self.func = func
        self._kind = kind
        # None for handlers built only to run (a django.tasks task, a test's handler).
        self._enqueuer = enqueuer
        # What every enqueue of this job uses unless the call says otherwise; ``unique`` is the
        # deduplication applied to each (None: not unique).
        self.defaults = EnqueueOptions(
            queue=queue, priority=priority, max_attempts=max_attempts, unique=unique
        )
        # Descriptor for operators (awa.descriptors): published by workers, shown in the admin.
        self.description = description
        self.owner = owner
        self.docs_url = docs_url
        self.is_async = asyncio.iscoroutinefunction(func)
        self.__doc__ = func.__doc__
        self.__name__ = func.__name__
        self.__qualname__ = func.__qualname__
        self.__module__ = func.__module__

    @property
    def queue(self) -> str | None:
        return self.defaults.queue

    @property
    def priority(self) -> int | None:
        return self.defaults.priority

    @property
    def max_attempts(self) -> int | None:
        return self.defaults.max_attempts

    @property
    def unique(self) -> Unique | None:
        return self.defaults.unique

    def using(self, **options: Unpack[EnqueueOptionArgs]) -> DeclaredJob[P, R]:
        """A copy of this job whose enqueues use these options by default (as django.tasks'
        ``Task.using``): ``send_welcome.using(queue="bulk", priority=4).enqueue(user_id=1)``.
        The copy runs the same handler under the same kind; this job is left unchanged."""
        changed = copy.copy(self)
        changed.defaults = self.defaults.using(**options)
        return changed

    @property
    def kind(self) -> str:
        """The stored job kind, ``"<app_label>.<function>"`` by default."""
        if self._kind is None:
            app = apps.get_containing_app_config(self.func.__module__)
            prefix = app.label if app is not None else self.func.__module__
            self._kind = f"{prefix}.{self.func.__name__}"
        return self._kind

    def __call__(self, ctx: JobContext, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(ctx, *args, **kwargs)

    def bind(self, kwargs: Mapping[str, object]) -> BoundArgs:
        """Validate ``kwargs`` as this job's arguments (raises ``InvalidJob``)."""
        return bind_arguments(self.func, kwargs, kind=self.kind)

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> int:
        """Enqueue with these arguments in the current transaction; returns the job id."""
        if args:
            raise TypeError(f"{self.kind}.enqueue takes keyword arguments only")
        return self._enqueuing().enqueue(self, args=kwargs)

    def enqueue_on_commit(self, *args: P.args, **kwargs: P.kwargs) -> PendingJob:
        """Validate now, enqueue when the current transaction commits; the ``PendingJob``
        returned learns the job's id then."""
        if args:
            raise TypeError(f"{self.kind}.enqueue_on_commit takes keyword arguments only")
        return self._enqueuing().enqueue_on_commit(self, args=kwargs)

    def enqueue_many(
        self, args_list: Iterable[Mapping[str, Any]], *, run_at: RunAt = None
    ) -> list[int]:
        """Enqueue one job per argument dict with COPY; returns the job ids."""
        return self._enqueuing().enqueue_many(self, args_list, run_at=run_at)

    def _enqueuing(self) -> Enqueuer:
        if self._enqueuer is None:
            raise TypeError(
                f"{self.kind} was not declared with @awa.job: enqueue it with awa.enqueue"
            )
        return self._enqueuer

    def __repr__(self) -> str:
        return f"<awa job {self.kind}>"


class JobRegistry:
    """Handlers known to this process, by kind. Tests may ``unregister`` what they add.

    Kinds under a resolver's prefix (``"django.tasks:"``) are not registered one by one: the
    resolver the app gives it (``awa_django.apps``) builds their handler on demand.
    """

    def __init__(self) -> None:
        self._jobs: list[DeclaredJob[Any, Any]] = []
        # Built on first lookup: kinds resolve app labels, which needs the app registry.
        self._by_kind: dict[str, DeclaredJob[Any, Any]] | None = None
        self._resolvers: dict[str, Callable[[str], DeclaredJob[Any, Any] | None]] = {}
        self._resolved: dict[str, DeclaredJob[Any, Any] | None] = {}

    def add_resolver(
        self, prefix: str, resolver: Callable[[str], DeclaredJob[Any, Any] | None]
    ) -> None:
        """Resolve kinds starting with ``prefix`` through ``resolver`` (``(kind) -> Job |
        None``, None when the kind names no handler here)."""
        self._resolvers[prefix] = resolver

    def add(self, job: DeclaredJob[Any, Any]) -> None:
        self._jobs.append(job)
        self._by_kind = None

    def jobs(self) -> list[DeclaredJob[Any, Any]]:
        """Every registered handler (resolver-built ones excluded), in registration order."""
        return list(self._jobs)

    def unregister(self, job: DeclaredJob[Any, Any]) -> None:
        self._jobs.remove(job)
        self._by_kind = None

    def get(self, kind: str) -> DeclaredJob[Any, Any] | None:
        if self._by_kind is None:
            # Later registrations win, so a reloaded module replaces its older handler.
            self._by_kind = {job.kind: job for job in self._jobs}
        found = self._by_kind.get(kind)
        if found is None and kind not in self._resolved:
            for prefix, resolver in self._resolvers.items():
                if kind.startswith(prefix):
                    # Misses are cached too: the worker looks a kind up for every claimed job.
                    self._resolved[kind] = resolver(kind)
                    break
        return found if found is not None else self._resolved.get(kind)


registry = JobRegistry()


def unknown_kind_hint(kind: str) -> str:
    """What to do about ``kind``, for which this process's registry has no handler: the nearest
    kind it has, and how handlers come to be registered (the same way in every process: web,
    worker and ``manage.py check``)."""
    if kind.startswith(TASK_KIND_PREFIX):
        path = kind.removeprefix(TASK_KIND_PREFIX)
        return (
            f"It is the django.tasks task {path!r}, which this process cannot import as a "
            "Task (its log says why): deploy the code that defines it here."
        )
    near = _nearest_kind(kind, tuple(sorted({job.kind for job in registry.jobs()})))
    guess = f"Did you mean {near!r}? " if near else ""
    return (
        f"{guess}A handler is registered when the module that declares it is imported: every "
        "installed app's jobs.py is imported, any other module (such as 'shop.background') "
        "must be listed in AWA['JOB_MODULES']."
    )


# Cached: a worker asks for every job of a kind it does not know, on its event loop, and a
# misconfigured fleet can claim thousands a minute; difflib compares the kind with every
# registered one.
@lru_cache(maxsize=1024)
def _nearest_kind(kind: str, known: tuple[str, ...]) -> str | None:
    near = difflib.get_close_matches(kind, known, n=1)
    return near[0] if near else None
