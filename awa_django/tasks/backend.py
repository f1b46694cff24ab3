"""``AwaBackend``: Django's ``django.tasks`` API on the awa queue.

A task is stored as an awa job of kind ``"django.tasks:<module_path>"`` with arguments
``{"args": [...], "kwargs": {...}}``; the worker re-imports the task by that path
(``awa_django.tasks.runner``). Enqueue is the ordinary awa insert on Django's connection, inside
the caller's transaction. Result ids are ``str(job_id)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields, replace
from datetime import datetime, timedelta
from functools import lru_cache, partial
from typing import Any, Final

from asgiref.sync import sync_to_async
from django.core.checks import CheckMessage, Error
from django.core.exceptions import ImproperlyConfigured
from django.db import connections, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from awa_django.conf import MAX_ATTEMPTS_LIMIT, get_settings, problems
from awa_django.declarations.enqueue_options import EnqueueOptions, check_int, check_tags
from awa_django.declarations.exact_json import moved
from awa_django.declarations.priorities import TASK_KIND_PREFIX, TASK_METADATA_KEY, awa_priority
from awa_django.exceptions import InvalidJob
from awa_django.job_record import JobRecord
from awa_django.limits import is_job_id
from awa_django.producer.enqueue import enqueue_at_lane_priority
from awa_django.storage.jobs import Claim, get_claims, jobs_by_id
from awa_django.storage.statement import run
from awa_django.tasks.awa_task import AwaTask
from awa_django.tasks.compat import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    normalize_json,
    task_enqueued,
)

# Stands in for the exception of a cancelled job, whose stored error only has a reason.
CANCELLED_PATH: Final = "awa_django.exceptions.Cancel"

_STATUS: Final[Mapping[str, TaskResultStatus]] = {
    "available": TaskResultStatus.READY,
    "scheduled": TaskResultStatus.READY,
    "retryable": TaskResultStatus.READY,
    "running": TaskResultStatus.RUNNING,
    "waiting_external": TaskResultStatus.RUNNING,
    "completed": TaskResultStatus.SUCCESSFUL,
    "failed": TaskResultStatus.FAILED,
    "cancelled": TaskResultStatus.FAILED,
    "dlq": TaskResultStatus.FAILED,
}


# Every field of a TaskResult, _return_value (not an __init__ argument) included.
RESULT_FIELDS: Final = tuple(field.name for field in fields(TaskResult))


def assembled_result(
    values: Mapping[str, Any], base: TaskResult[Any, Any] | None = None
) -> TaskResult[Any, Any]:
    """A ``TaskResult`` of ``values`` (the fields ``base`` has otherwise), made without its
    ``__init__``: ``__post_init__`` runs ``normalize_json`` over the arguments, and the
    arguments of a stored job are decoded JSON, which it would return unchanged. In a worker
    that made two results per task it was a tenth of what a no-op task cost
    (docs/benchmarks.md, "django.tasks drain")."""
    result = object.__new__(TaskResult)
    for name in RESULT_FIELDS:
        object.__setattr__(result, name, values[name] if name in values else getattr(base, name))
    return result


def task_error(entry: Mapping[str, Any]) -> TaskError:
    """One stored awa error (or cancel reason) as Django's ``TaskError``."""
    if "type" in entry:
        return TaskError(exception_class_path=entry["type"], traceback=entry.get("traceback", ""))
    return TaskError(exception_class_path=CANCELLED_PATH, traceback=str(entry.get("reason", "")))


def validate_awa_options(task: AwaTask) -> None:
    """Raise ``InvalidTask`` for per-task awa options that ``awa.enqueue`` would refuse."""
    try:
        if task.max_attempts is not None:
            check_int(task.max_attempts, name="max_attempts", low=1, high=MAX_ATTEMPTS_LIMIT)
        if task.tags is not None:
            check_tags(task.tags)
    except InvalidJob as exc:
        raise InvalidTask(str(exc)) from None


class AwaBackend(BaseTaskBackend):
    """Runs ``@task`` functions on awa: ``TASKS = {"default": {"BACKEND":
    "awa_django.tasks.AwaBackend"}}``. See docs/django-tasks.md for ``OPTIONS`` and the
    per-task ``max_attempts``/``tags`` of ``AwaTask``."""

    task_class = AwaTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        # Django builds backends at import time (``@task`` validates against one): read options
        # only, never the database or ``settings.AWA``.
        super().__init__(alias, params)
        unknown = set(self.options) - {"max_attempts", "tags", "queue_map", "eager"}
        if unknown:
            raise ImproperlyConfigured(
                f"TASKS[{alias!r}]['OPTIONS'] has unknown keys {sorted(unknown)}; awa accepts "
                "max_attempts, tags, queue_map and eager"
            )
        # Eager mode for this backend's tasks (None: AWA["EAGER"]); see docs/testing.md.
        self.eager: bool | None = self.options.get("eager")
        if self.eager is not None and not isinstance(self.eager, bool):
            raise ImproperlyConfigured(
                f"TASKS[{alias!r}]['OPTIONS']['eager'] must be True or False, got {self.eager!r}"
            )
        # One attempt, as Django's task API has no retries (its own backends mark a task that
        # raises FAILED at once); OPTIONS["max_attempts"] opts into awa's retries.
        self.max_attempts: int = self.options.get("max_attempts", 1)
        self.tags: tuple[str, ...] = tuple(self.options.get("tags", ()))
        self.queue_map: dict[str, str] = dict(self.options.get("queue_map", {}))

    def validate_task(self, task: Task[Any, Any]) -> None:
        # Refused where the task is declared or copied (Task.__post_init__ calls this), not at
        # some later enqueue.
        if isinstance(task, AwaTask):
            validate_awa_options(task)
        # The backport types run_after as a datetime only; a timedelta (from now) is accepted
        # here too, as Django's own documentation allows, and resolved at enqueue.
        if isinstance(task.run_after, timedelta):
            super().validate_task(replace(task, run_after=None))
            return
        super().validate_task(task)

    def awa_queue(self, queue_name: str) -> str:
        """The awa queue a Django queue name runs on (``OPTIONS["queue_map"]``, else itself)."""
        return self.queue_map.get(queue_name, queue_name)

    def check(self, **kwargs: Any) -> Iterable[CheckMessage]:  # type: ignore[override]
        """Every Django queue this backend accepts must be an awa queue (``awa.E101``);
        otherwise enqueue would fail at run time."""
        yield from super().check(**kwargs)
        if problems():
            return  # the AWA settings checks report those first
        declared = get_settings().QUEUES
        for queue_name in sorted(self.queues):
            if self.awa_queue(queue_name) not in declared:
                yield Error(
                    f"TASKS[{self.alias!r}] queue {queue_name!r} runs on awa queue "
                    f"{self.awa_queue(queue_name)!r}, which AWA['QUEUES'] does not declare.",
                    hint="Declare it in AWA['QUEUES'] or map it with OPTIONS['queue_map'].",
                    id="awa.E101",
                )

    def enqueue(
        self, task: Task[Any, Any], args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> TaskResult[Any, Any]:
        self.validate_task(task)
        result, deferred = self._insert(task, args, kwargs)
        if not deferred:
            task_enqueued.send(type(self), task_result=result)
        return result

    async def aenqueue(
        self, task: Task[Any, Any], args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> TaskResult[Any, Any]:
        self.validate_task(task)
        result, deferred = await sync_to_async(self._insert, thread_sensitive=True)(
            task, args, kwargs
        )
        if not deferred:
            await task_enqueued.asend(type(self), task_result=result)
        return result

    def job_of(
        self,
        task: Task[Any, Any],
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        *,
        run_after: datetime | None,
    ) -> tuple[str, dict[str, Any], EnqueueOptions]:
        """The awa job that runs ``task`` with these arguments: its kind, its arguments and its
        options (at a stored lane priority, ``enqueue_at_lane_priority``). What ``enqueue``
        inserts, and what a workflow step of a task is made of (awa_django.producer.workflows)."""
        # Django's own normalisation first (tuples become lists, mappings dicts, bytes text), as
        # TaskResult applies it: what the task receives is what a result reports it was given.
        try:
            job_args: dict[str, Any] = {
                "args": normalize_json(list(args)),
                "kwargs": normalize_json(dict(kwargs)),
            }
        except (TypeError, ValueError, RecursionError):
            # Django refuses the value too (or it nests past Python's recursion limit, which
            # Django's normaliser recurses against): the exact check below names it.
            job_args = {"args": list(args), "kwargs": dict(kwargs)}
        task_meta: dict[str, Any] = {
            "priority": task.priority,
            "queue_name": task.queue_name,
            "run_after": None if run_after is None else run_after.isoformat(),
            "backend": self.alias,
        }
        # Per-task awa options win over OPTIONS; only the ones set are recorded, so the result
        # task read back carries them and a stock task's job is unchanged.
        max_attempts, tags = self.max_attempts, self.tags
        if isinstance(task, AwaTask):
            if task.max_attempts is not None:
                max_attempts = task_meta["max_attempts"] = task.max_attempts
            if task.tags is not None:
                tags = task.tags
                task_meta["tags"] = list(tags)
        options = EnqueueOptions(
            queue=self.awa_queue(task.queue_name),
            priority=awa_priority(task.priority),
            run_at=run_after,
            max_attempts=max_attempts,
            metadata={TASK_METADATA_KEY: task_meta},
            tags=tags,
            eager=self.eager,
        )
        return f"{TASK_KIND_PREFIX}{task.module_path}", job_args, options

    def _insert(
        self, task: Task[Any, Any], args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> tuple[TaskResult[Any, Any], bool]:
        """Insert the job; returns its result and whether ``task_enqueued`` was left to commit
        (inside a transaction the signal waits for it, and never fires on rollback)."""
        run_after = task.run_after
        if isinstance(run_after, timedelta):
            run_after = timezone.now() + run_after
        kind, job_args, options = self.job_of(task, args, kwargs, run_after=run_after)
        try:
            job_id = enqueue_at_lane_priority(kind, args=job_args, options=options)
        except InvalidJob as refusal:
            # The job's arguments are {"args": [...], "kwargs": {...}}: a refused value is named
            # as the caller passed it, args[0] or kwargs.name.
            refusal = moved(moved(refusal, "args.args", "args"), "args.kwargs", "kwargs")
            raise refusal from None
        stored_task = task if run_after is task.run_after else task.using(run_after=run_after)
        result: TaskResult[Any, Any] = TaskResult(
            task=stored_task,
            id=str(job_id),
            status=TaskResultStatus.READY,
            enqueued_at=timezone.now(),
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=job_args["args"],
            kwargs=job_args["kwargs"],
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        # The queue's database: the job commits with a transaction there (producer.enqueue).
        conf = get_settings()
        alias = conf.queue_database(options.queue or conf.DEFAULT_QUEUE)
        if not connections[alias].in_atomic_block:
            return result, False
        transaction.on_commit(
            partial(task_enqueued.send, type(self), task_result=result), using=alias
        )
        return result, True

    def get_result(self, result_id: str) -> TaskResult[Any, Any]:
        # Result ids are job ids in decimal: anything else (signs, spaces, other digits, values
        # past bigint) names no result, and is not sent to the database.
        digits = isinstance(result_id, str) and result_id.isascii() and result_id.isdigit()
        job_id = int(result_id) if digits else 0
        if not is_job_id(job_id):
            raise TaskResultDoesNotExist(result_id)
        found: list[tuple[str, JobRecord, list[Claim]]] = []
        for alias in self.databases():
            with connections[alias].cursor() as cursor:
                records = run(cursor, jobs_by_id([job_id]))
                if records and records[0].kind.startswith(TASK_KIND_PREFIX):
                    claims = run(cursor, get_claims([job_id])).get(job_id, [])
                    found.append((alias, records[0], claims))
        if not found:
            raise TaskResultDoesNotExist(result_id)
        if len(found) > 1:
            # Job ids count per database (a queue's "database"): this id names a task in each.
            raise ValueError(
                f"result {result_id} names a task in databases {[f[0] for f in found]}; "
                "read it with awa.get_job(id, database=...)"
            )
        return self.result_from_record(found[0][1], found[0][2])

    def databases(self) -> list[str]:
        """The databases of this backend's queues (a queue's ``database``), where its results
        are."""
        conf = get_settings()
        aliases = dict.fromkeys(conf.queue_database(self.awa_queue(q)) for q in sorted(self.queues))
        return list(aliases) or [conf.DATABASE_ALIAS]

    def result_from_record(
        self, record: JobRecord, claims: Sequence[Claim]
    ) -> TaskResult[Any, Any]:
        """The ``TaskResult`` of a stored job: its state, errors and one worker id per claim."""
        status = _STATUS[record.state]
        finished = status in (TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED)
        result = self.task_result(
            import_string(record.kind.removeprefix(TASK_KIND_PREFIX)),
            job_id=record.job_id,
            status=status,
            args=record.args,
            metadata=record.metadata,
            created_at=record.created_at,
            claims=claims,
            finished_at=record.finalized_at if finished else None,
            errors=record.errors,
        )
        if status == TaskResultStatus.SUCCESSFUL:
            object.__setattr__(result, "_return_value", record.result)
        return result

    def task_result(
        self,
        task: Task[Any, Any],
        *,
        job_id: int,
        status: TaskResultStatus,
        args: Mapping[str, Any],
        metadata: Mapping[str, Any],
        created_at: datetime,
        claims: Sequence[Claim],
        finished_at: datetime | None,
        errors: Sequence[Mapping[str, Any]],
    ) -> TaskResult[Any, Any]:
        """The ``TaskResult`` of the job ``job_id`` of ``task``, from the job's stored arguments
        and metadata and its claims, oldest first (one worker id each)."""
        return assembled_result(
            {
                "task": self.enqueued_task(task, metadata.get(TASK_METADATA_KEY, {})),
                "id": str(job_id),
                "status": status,
                "enqueued_at": created_at,
                "started_at": claims[0].claimed_at if claims else None,
                "finished_at": finished_at,
                "last_attempted_at": claims[-1].claimed_at if claims else None,
                # Decoded from the job's stored JSON: already what normalize_json makes.
                "args": args.get("args", []),
                "kwargs": args.get("kwargs", {}),
                "backend": self.alias,
                "errors": [task_error(entry) for entry in errors],
                "worker_ids": [claim.claimed_by for claim in claims],
                "_return_value": None,
            }
        )

    def enqueued_task(self, task: Task[Any, Any], meta: Mapping[str, Any]) -> Task[Any, Any]:
        """``task`` as it was enqueued: with the options the job's metadata recorded."""
        tags = meta.get("tags")
        return _enqueued_task(
            task,
            priority=meta.get("priority", task.priority),
            queue_name=meta.get("queue_name", task.queue_name),
            run_after=meta.get("run_after"),
            backend=meta.get("backend", self.alias),
            max_attempts=meta.get("max_attempts"),
            tags=None if tags is None else tuple(tags),
        )


# Keyed by everything the copy is made of, so a cached copy is the one using() would make now; a
# worker running many jobs of few tasks makes each once, not once per job (using() validates the
# task again each time, a sixth of what a no-op task cost the worker).
@lru_cache(maxsize=1024)
def _enqueued_task(
    task: Task[Any, Any],
    *,
    priority: int,
    queue_name: str,
    run_after: str | None,
    backend: str,
    max_attempts: int | None,
    tags: tuple[str, ...] | None,
) -> Task[Any, Any]:
    # The per-call awa options the job was enqueued with (absent: the task's own stand).
    awa_options: dict[str, Any] = (
        {"max_attempts": max_attempts, "tags": tags} if isinstance(task, AwaTask) else {}
    )
    return task.using(
        priority=priority,
        queue_name=queue_name,
        run_after=None if run_after is None else datetime.fromisoformat(run_after),
        backend=backend,
        **awa_options,
    )
