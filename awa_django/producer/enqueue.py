"""Enqueueing jobs on Django's connection, inside the caller's transaction.

``enqueue`` is a plain insert on the connection of the queue's database (its ``database``
option, else ``AWA["DATABASE_ALIAS"]``): inside ``transaction.atomic()`` on that alias the job
commits or rolls back with the caller's rows, and the NOTIFY
that wakes workers is delivered only at commit. Everything is validated before the first write,
so a bad argument raises ``InvalidJob`` and nothing is written. On a database where awa_django's
migrations are not applied, it raises ``NotMigrated``, which says so and names the command.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Concatenate, Final, ParamSpec, TypeVar, Unpack, overload

from django.db import connections, transaction
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from awa_django.conf import get_settings, queue_databases
from awa_django.core.enqueued import announce_enqueued
from awa_django.declarations.arguments import BoundArgs, json_each
from awa_django.declarations.enqueue_options import (
    NO_OPTIONS,
    EnqueueOptionArgs,
    EnqueueOptions,
    ResolvedOptions,
    RunAt,
)
from awa_django.declarations.exact_json import moved
from awa_django.declarations.jobs import (
    DeclaredJob,
    JobContext,
    registry,
)
from awa_django.declarations.pending_job import PendingJob
from awa_django.declarations.priorities import STORED_PRIORITY_MAX, STORED_PRIORITY_MIN
from awa_django.declarations.resolve import bind_args, resolve_job
from awa_django.declarations.unique import Unique, UniqueKey, unique_key
from awa_django.exceptions import InvalidJob, UniqueConflict
from awa_django.producer.eager import run_after_commit
from awa_django.storage import backlog, lanes
from awa_django.storage import queue as queue_storage
from awa_django.storage.copy_text import CopyBatch
from awa_django.storage.migration_state import reported_unmigrated
from awa_django.storage.queue import NewJob
from awa_django.storage.statement import run, run_copy, run_on
from awa_django.storage.unique import lock_unique_keys, record_unique_claims

P = ParamSpec("P")
R = TypeVar("R")


def _bind_each(
    kind: str, job: DeclaredJob[Any, Any] | None, arg_dicts: Iterable[Mapping[str, Any] | None]
) -> Iterator[BoundArgs]:
    """``bind_args`` of each dict of a batch; a refusal names its position (``args_list[3].x``)."""
    for position, args in enumerate(arg_dicts):
        yield _bind_at(kind, job, position, args)


def _bind_at(kind: str, job: DeclaredJob[Any, Any] | None, position: int, args: Any) -> BoundArgs:
    """``bind_args`` of the dict at ``position`` of a batch, a refusal naming the position."""
    try:
        return bind_args(kind, job, args)
    except InvalidJob as refusal:
        raise moved(refusal, "args", f"args_list[{position}]") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class _UniqueBatch:
    """The unique keys of a batch of jobs, locked in the caller's transaction until it ends.

    ``fresh`` lists the positions to enqueue: their key is free and not already taken by an
    earlier position of the batch. The other positions resolve to the job holding their key.
    """

    unique: Unique
    options: ResolvedOptions
    keys: list[UniqueKey]
    held: dict[bytes, int]
    fresh: list[int]

    @classmethod
    def lock(
        cls,
        cursor: CursorWrapper,
        unique: Unique,
        options: ResolvedOptions,
        args_list: Sequence[Mapping[str, Any]],
    ) -> _UniqueBatch:
        on_conflict = options.on_conflict
        now = timezone.now()
        keys = [
            unique_key(unique, kind=options.kind, queue=options.queue, args=args, now=now)
            for args in args_list
        ]
        first: dict[bytes, int] = {}
        for position, key in enumerate(keys):
            earlier = first.setdefault(key.digest, position)
            if earlier != position and on_conflict == "raise":
                # Refused before the keys are locked.
                field = f"args_list[{position}]"
                raise InvalidJob(
                    f"{field} has the same unique key as args_list[{earlier}]", field=field
                )
        held = run(cursor, lock_unique_keys(sorted(first)))
        if on_conflict == "raise":
            for key in keys:
                holder = held.get(key.digest)
                if holder is not None:
                    raise UniqueConflict(
                        f"a {options.kind!r} job with the same unique key is already enqueued "
                        f"(job {holder}); pass on_conflict='return' to get its id instead",
                        job_id=holder,
                    )
        fresh = [
            p for p, key in enumerate(keys) if key.digest not in held and first[key.digest] == p
        ]
        return cls(unique=unique, options=options, keys=keys, held=held, fresh=fresh)

    def record(self, cursor: CursorWrapper, job_ids: Sequence[int]) -> None:
        """Make the jobs enqueued for the ``fresh`` positions the holders of their keys."""
        if job_ids:
            run(
                cursor,
                record_unique_claims(
                    keys=[self.keys[p].digest for p in self.fresh],
                    job_ids=job_ids,
                    kind=self.options.kind,
                    queue=self.options.queue,
                    states=self.unique.states,
                    expires_at=self.keys[0].expires_at,
                ),
            )

    def result(self, job_ids: Sequence[int]) -> list[int]:
        """The job id of every position: its own new job, or the one holding its key."""
        new = {self.keys[p].digest: job_id for p, job_id in zip(self.fresh, job_ids, strict=True)}
        return [self.held.get(key.digest, new.get(key.digest, 0)) for key in self.keys]


def enqueue(
    kind_or_job: str | DeclaredJob[Any, Any],
    *,
    args: Mapping[str, Any] | None = None,
    options: EnqueueOptions = NO_OPTIONS,
    **changes: Unpack[EnqueueOptionArgs],
) -> int:
    """Enqueue one job in the current transaction and return its id.

    The options (``options``, with ``changes`` applied; see ``awa.EnqueueOptions``) override
    the job's own, which override ``AWA``'s. ``run_at`` in the future (a datetime, or a
    timedelta from now) schedules the job; otherwise it is runnable as soon as the transaction
    commits. ``unique`` (default: the job's own) deduplicates: while a job with the same key is
    in a covered state, this raises ``UniqueConflict``, or with ``on_conflict="return"`` returns
    that job's id. Jobs with the same ``ordering_key`` go to the same enqueue shard of their
    queue, so they are claimed in enqueue order even when the queue is split into shards
    (docs/scheduling.md). ``eager`` (default ``AWA["EAGER"]``) runs it in this process once the
    transaction commits (docs/testing.md#eager-mode).
    """
    kind, job = resolve_job(kind_or_job)
    bound = bind_args(kind, job, args)
    resolved = options.using(**changes).resolve(kind, job)
    return _enqueue_one(bound, resolved)


def enqueue_at_lane_priority(
    kind_or_job: str | DeclaredJob[Any, Any],
    *,
    args: Mapping[str, Any] | None,
    options: EnqueueOptions,
) -> int:
    """``enqueue`` at any stored lane priority, ``STORED_PRIORITY_MIN..MAX``, not only the
    native 1..4: how the django.tasks backend stores Django's -100..100
    (awa_django.declarations.priorities).
    """
    kind, job = resolve_job(kind_or_job)
    bound = bind_args(kind, job, args)
    resolved = options.resolve(
        kind,
        job,
        priority_range=(STORED_PRIORITY_MIN, STORED_PRIORITY_MAX),
    )
    return _enqueue_one(bound, resolved)


def _ensure_lanes(alias: str, queue: str, priority: int, run_at: datetime | None) -> None:
    """Before a job of ``queue`` and ``priority`` goes into the caller's transaction: make sure
    its lanes exist, created in a transaction of their own (``storage.lanes.ensure_lanes``; no
    statement once this process knows them). A job scheduled for later enters its lane when
    the leader promotes it, in the leader's own short transaction."""
    if run_at is None or run_at <= timezone.now():
        lanes.ensure_lanes(alias, queue, priority)


def queue_alias(queue: str) -> str:
    """The alias ``queue``'s jobs are written to, refused (``InvalidJob``) when the caller is in
    a transaction on another database that holds queues and not in one on this alias: the job
    would commit on its own, whatever became of the caller's transaction."""
    alias = get_settings().queue_database(queue)
    databases = queue_databases()
    # Only databases holding queues are looked at: with one database nothing changes, and a
    # transaction on an unrelated database says nothing about where the caller meant the job.
    if len(databases) > 1 and not connections[alias].in_atomic_block:
        for other in databases:
            if other != alias and connections[other].in_atomic_block:
                raise InvalidJob(
                    f"queue {queue!r} lives in database {alias!r}, but this enqueue runs in a "
                    f"transaction on {other!r}, which the job could not commit or roll back "
                    f"with; enqueue inside transaction.atomic(using={alias!r}), or use "
                    "enqueue_on_commit",
                    field="queue",
                )
    return alias


def _enqueue_one(bound: BoundArgs, options: ResolvedOptions) -> int:
    """Insert one validated job in the current transaction and announce it."""
    alias = queue_alias(options.queue)
    _ensure_lanes(alias, options.queue, options.priority, options.run_at)
    new_job = NewJob(
        kind=options.kind,
        queue=options.queue,
        priority=options.priority,
        args_json=bound.json,
        max_attempts=options.max_attempts,
        run_at=options.run_at,
        metadata_json=options.metadata_json,
        tags=options.tags,
    )
    alone = False
    if options.unique is None:
        conn = connections[alias]
        # Outside atomic() Django runs the statement in autocommit: it is the whole transaction,
        # so it publishes the job itself and the commit has nothing left to do. Inside one, the
        # connection's autocommit is not looked up (it is off, and the lookup costs calls).
        alone = not conn.in_atomic_block and conn.get_autocommit()
        with reported_unmigrated(alias):
            job_id = run_on(conn, queue_storage.enqueue_job(new_job, alone=alone))
    else:
        # The key stays locked until the caller's transaction ends, so a concurrent producer of
        # the same key waits and then sees this job's claim.
        with (
            reported_unmigrated(alias),
            transaction.atomic(using=alias),
            connections[alias].cursor() as cursor,
        ):
            batch = _UniqueBatch.lock(cursor, options.unique, options, [bound.args])
            if not batch.fresh:
                return batch.result([])[0]
            job_id = run(cursor, queue_storage.enqueue_job(new_job))
            batch.record(cursor, [job_id])
    announce_enqueued(alias, [job_id], kind=options.kind, queue=options.queue, committed=alone)
    _maybe_eager(alias, options, [job_id])
    return job_id


def _maybe_eager(alias: str, options: ResolvedOptions, job_ids: list[int]) -> None:
    if not options.runs_eagerly():
        return
    run_after_commit(alias, options.queue, job_ids)


def enqueue_on_commit(
    kind_or_job: str | DeclaredJob[Any, Any],
    *,
    args: Mapping[str, Any] | None = None,
    options: EnqueueOptions = NO_OPTIONS,
    using: str | None = None,
    **changes: Unpack[EnqueueOptionArgs],
) -> PendingJob:
    """Validate now and enqueue after the current transaction commits (opt-in deferral); the
    ``PendingJob`` returned learns the job's id at the commit. The job goes to its queue's
    database whichever alias ``using`` waits for.

    Takes the options of ``enqueue``. ``on_conflict`` defaults to ``"return"`` here: a unique
    job's duplicate is dropped quietly, as there is no caller left to raise to; with
    ``"raise"``, ``UniqueConflict`` is raised from the commit. ``using`` names the database
    alias whose transaction to wait for (Django's default alias when None). Use it when the
    business transaction runs on a different database than the queue; when they share one,
    ``enqueue`` inside the transaction is the safer choice: the job then commits or rolls back
    with the business rows.
    """
    kind, job = resolve_job(kind_or_job)
    bound = bind_args(kind, job, args)
    chosen = options.using(**changes)
    resolved = chosen.resolve(kind, job, on_conflict="return")
    pending = PendingJob(kind)
    at_commit = chosen.using(on_conflict=resolved.on_conflict)

    def enqueue_at_commit() -> None:
        # Resolved again at commit, as an enqueue of that moment: a timedelta run_at then
        # counts from the commit, and the settings and trace context are the commit's.
        pending.enqueued_as(enqueue(kind_or_job, args=bound.args, options=at_commit))

    transaction.on_commit(enqueue_at_commit, using=using)
    return pending


def enqueue_many(
    kind_or_job: str | DeclaredJob[Any, Any],
    args_list: Iterable[Mapping[str, Any]],
    *,
    options: EnqueueOptions = NO_OPTIONS,
    **changes: Unpack[EnqueueOptionArgs],
) -> list[int]:
    """Enqueue one job per argument dict with a single COPY; returns the ids in order.

    Takes the options of ``enqueue``, shared by every job of the batch. If any argument dict is
    invalid, ``InvalidJob`` names it and nothing is written. All jobs share one lane (on a
    sharded queue: the shard of ``ordering_key``, or one picked at random), so the batch
    reserves its positions with one lock and one round trip. With ``unique`` (or a unique job),
    a job whose key is held raises ``UniqueConflict`` and nothing is written; with
    ``on_conflict="return"`` its position gets the holder's id (or the id of the earlier job of
    the batch with the same key).
    """
    kind, job = resolve_job(kind_or_job)
    resolved = options.using(**changes).resolve(kind, job)
    if isinstance(args_list, str | bytes | Mapping) or not isinstance(args_list, Iterable):
        raise InvalidJob(
            f"args_list must be a list of argument dicts, got {args_list!r}", field="args_list"
        )
    arg_dicts = list(args_list)
    if not arg_dicts:
        return []
    alias = queue_alias(resolved.queue)
    _ensure_lanes(alias, resolved.queue, resolved.priority, resolved.run_at)
    now = timezone.now()
    batch: _UniqueBatch | None = None
    with (
        reported_unmigrated(alias),
        transaction.atomic(using=alias),
        connections[alias].cursor() as cursor,
    ):
        if resolved.unique is None:
            # Bound while the COPY streams, so the server stores rows on its own core while the
            # next ones are checked. An invalid argument raises inside the COPY, which aborts
            # it, and the atomic block rolls back the lane reservation: nothing is written.
            count = len(arg_dicts)
            texts: Iterable[str] = json_each(
                None if job is None else job.func,
                arg_dicts,
                lambda position, args: _bind_at(kind, job, position, args).json,
            )
        else:
            bound = list(_bind_each(kind, job, arg_dicts))
            batch = _UniqueBatch.lock(cursor, resolved.unique, resolved, [b.args for b in bound])
            count = len(batch.fresh)
            texts = [bound[p].json for p in batch.fresh]
        shared = CopyBatch(
            queue=resolved.queue,
            priority=resolved.priority,
            kind=kind,
            count=count,
            max_attempts=resolved.max_attempts,
            metadata_json=resolved.metadata_json,
            tags=resolved.tags,
            run_at=resolved.run_at or now,
            now=now,
            ordering_key=resolved.ordering_key,
        )
        if not count:
            job_ids = []
        elif resolved.run_at is not None and resolved.run_at > now:
            job_ids = run_copy(cursor, backlog.copy_deferred(shared, texts))
        else:
            job_ids = run_copy(cursor, queue_storage.copy_ready(shared, texts))
        if batch is not None:
            batch.record(cursor, job_ids)
    announce_enqueued(alias, job_ids, kind=resolved.kind, queue=resolved.queue)
    if job_ids:
        _maybe_eager(alias, resolved, job_ids)
    return job_ids if batch is None else batch.result(job_ids)


class _Enqueuer:
    """This module's functions, as each job ``@awa.job`` declares calls them from its
    ``enqueue``, ``enqueue_on_commit`` and ``enqueue_many`` (``declarations.jobs.Enqueuer``)."""

    def enqueue(self, kind_or_job: DeclaredJob[Any, Any], *, args: Mapping[str, Any]) -> int:
        return enqueue(kind_or_job, args=args)

    def enqueue_on_commit(
        self, kind_or_job: DeclaredJob[Any, Any], *, args: Mapping[str, Any]
    ) -> PendingJob:
        return enqueue_on_commit(kind_or_job, args=args)

    def enqueue_many(
        self,
        kind_or_job: DeclaredJob[Any, Any],
        args_list: Iterable[Mapping[str, Any]],
        *,
        run_at: RunAt,
    ) -> list[int]:
        return enqueue_many(kind_or_job, args_list, run_at=run_at)


_ENQUEUER: Final = _Enqueuer()


@overload
def job(func: Callable[Concatenate[JobContext, P], R], /) -> DeclaredJob[P, R]: ...


@overload
def job(
    func: None = None,
    /,
    *,
    kind: str | None = None,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    unique: Unique | None = None,
    description: str = "",
    owner: str = "",
    docs_url: str = "",
) -> Callable[[Callable[Concatenate[JobContext, P], R]], DeclaredJob[P, R]]: ...


def job(
    func: Callable[Concatenate[JobContext, P], R] | None = None,
    /,
    *,
    kind: str | None = None,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    unique: Unique | None = None,
    description: str = "",
    owner: str = "",
    docs_url: str = "",
) -> DeclaredJob[P, R] | Callable[[Callable[Concatenate[JobContext, P], R]], DeclaredJob[P, R]]:
    """Register a sync or async function as a job handler (bare ``@job`` or ``@job(...)``).

    Options left unset fall back to ``AWA`` defaults at enqueue time; an enqueue call can still
    override queue, priority and max_attempts. ``unique=awa.Unique(...)`` deduplicates every
    enqueue of the job (docs/scheduling.md). ``description``, ``owner`` and ``docs_url``
    describe the kind to operators (see ``awa_django.ops.descriptors``).
    """

    def decorate(fn: Callable[Concatenate[JobContext, P], R]) -> DeclaredJob[P, R]:
        registered = DeclaredJob(
            fn,
            kind=kind,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            unique=unique,
            description=description,
            owner=owner,
            docs_url=docs_url,
            enqueuer=_ENQUEUER,
        )
        registry.add(registered)
        return registered

    return decorate(func) if func is not None else decorate
