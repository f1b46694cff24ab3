"""Enqueueing jobs on Django's connection, inside the caller's transaction.

``enqueue`` is a plain insert on the connection of ``AWA["DATABASE_ALIAS"]``: inside
``transaction.atomic()`` the job commits or rolls back with the caller's rows, and the NOTIFY
that wakes workers is delivered only at commit. Everything is validated before the first write,
so a bad argument raises ``InvalidJob`` and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from awa_django.arguments import BoundArgs
from awa_django.conf import MAX_ATTEMPTS_LIMIT, PRIORITY_MAX, PRIORITY_MIN, get_settings
from awa_django.discovery import ensure_jobs_discovered
from awa_django.eager import run_after_commit
from awa_django.exact_json import check_text, moved, path_of, to_json_text
from awa_django.exceptions import InvalidJob, UniqueConflict
from awa_django.jobs import EnqueueFunctions, Job, provide_enqueue, registry
from awa_django.priorities import STORED_PRIORITY_MAX, STORED_PRIORITY_MIN
from awa_django.signals import job_enqueued
from awa_django.storage import backlog
from awa_django.storage import queue as queue_storage
from awa_django.storage.queue import NewJob
from awa_django.storage.unique import lock_unique_keys, record_unique_claims
from awa_django.telemetry import get_telemetry
from awa_django.unique import OnConflict, Unique, UniqueKey, check_on_conflict, unique_key

RunAt = datetime | timedelta | None
MAX_TAGS = 20
MAX_ORDERING_KEY_LENGTH = 200
# Where a job's ordering key travels: awa.enqueue_shard hashes it to pick the lane.
ORDERING_KEY_METADATA = "awa:ordering_key"


@dataclass(frozen=True, slots=True, kw_only=True)
class _Options:
    kind: str
    queue: str
    priority: int
    max_attempts: int
    run_at: datetime | None
    metadata_json: str
    metadata: dict[str, Any]
    tags: tuple[str, ...]


def _resolve_job(kind_or_job: str | Job[Any, Any]) -> tuple[str, Job[Any, Any] | None]:
    if isinstance(kind_or_job, Job):
        return kind_or_job.kind, kind_or_job
    if isinstance(kind_or_job, str) and kind_or_job:
        check_text(kind_or_job, field="kind")
        job = registry.get(kind_or_job)
        if job is None:
            # A web process may enqueue by name before anything imported the jobs modules; the
            # handler's signature and defaults still apply once they are imported.
            ensure_jobs_discovered()
            job = registry.get(kind_or_job)
        return kind_or_job, job
    raise InvalidJob(
        f"kind must be a registered @awa.job function or a kind string, got {kind_or_job!r}",
        field="kind",
    )


def _resolve_run_at(run_at: RunAt) -> datetime | None:
    if run_at is None:
        return None
    if isinstance(run_at, timedelta):
        try:
            return timezone.now() + run_at
        except OverflowError:
            raise InvalidJob(
                f"run_at {run_at!r} from now is past the year 9999", field="run_at"
            ) from None
    if isinstance(run_at, datetime):
        if timezone.is_naive(run_at):
            if settings.USE_TZ:
                raise InvalidJob(
                    "run_at must be timezone-aware when USE_TZ is on; use "
                    "django.utils.timezone.now() + timedelta(...)",
                    field="run_at",
                )
            return timezone.make_aware(run_at)
        return run_at
    raise InvalidJob(
        f"run_at must be a datetime, a timedelta or None, got {run_at!r}", field="run_at"
    )


def _check_int(value: object, *, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidJob(f"{name} must be an integer {low}..{high}, got {value!r}", field=name)
    return value


def check_tags(tags: object) -> tuple[str, ...]:
    """``tags`` (None or a list of strings) as stored, else ``InvalidJob`` naming the tag."""
    if tags is None:
        return ()
    if isinstance(tags, str | bytes) or not isinstance(tags, Sequence):
        raise InvalidJob(f"tags must be a list of strings, got {tags!r}", field="tags")
    tag_tuple = tuple(tags)
    if len(tag_tuple) > MAX_TAGS:
        raise InvalidJob(f"tags must be at most {MAX_TAGS}, got {len(tag_tuple)}", field="tags")
    for index, tag in enumerate(tag_tuple):
        field = path_of("tags", (index,))
        if not isinstance(tag, str) or not tag:
            raise InvalidJob(f"{field} must be a non-empty string, got {tag!r}", field=field)
        check_text(tag, field=field)
    return tag_tuple


def _options(
    kind: str,
    job: Job[Any, Any] | None,
    *,
    queue_name: str | None,
    priority: int | None,
    max_attempts: int | None,
    run_at: RunAt,
    metadata: Mapping[str, Any] | None,
    tags: Sequence[str] | None,
    ordering_key: str | None = None,
    priority_range: tuple[int, int] = (PRIORITY_MIN, PRIORITY_MAX),
) -> _Options:
    conf = get_settings()
    chosen_queue = queue_name or (job.queue if job else None) or conf.DEFAULT_QUEUE
    if chosen_queue not in conf.QUEUES:
        raise InvalidJob(
            f"queue {chosen_queue!r} of job {kind!r} is unknown; declared queues are "
            f"{sorted(conf.QUEUES)} (add it to AWA['QUEUES'])",
            field="queue",
        )
    chosen_priority = _check_int(
        priority
        if priority is not None
        else (job.priority if job and job.priority is not None else conf.DEFAULT_PRIORITY),
        name="priority",
        low=priority_range[0],
        high=priority_range[1],
    )
    chosen_attempts = _check_int(
        max_attempts
        if max_attempts is not None
        else (
            job.max_attempts if job and job.max_attempts is not None else conf.DEFAULT_MAX_ATTEMPTS
        ),
        name="max_attempts",
        low=1,
        high=MAX_ATTEMPTS_LIMIT,
    )
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidJob(f"metadata must be a dict, got {metadata!r}", field="metadata")
    meta = dict(metadata or {})
    if ordering_key is not None:
        if not isinstance(ordering_key, str) or not ordering_key:
            raise InvalidJob(
                f"ordering_key must be a non-empty string, got {ordering_key!r}",
                field="ordering_key",
            )
        if len(ordering_key) > MAX_ORDERING_KEY_LENGTH:
            raise InvalidJob(
                f"ordering_key must be at most {MAX_ORDERING_KEY_LENGTH} characters, got "
                f"{len(ordering_key)}",
                field="ordering_key",
            )
        # Checked here, so that a bad key is not reported as part of the metadata it joins.
        check_text(ordering_key, field="ordering_key")
        meta[ORDERING_KEY_METADATA] = ordering_key
    # The enqueue site's trace context, so the job's span continues this trace.
    get_telemetry().inject(meta)
    tag_tuple = check_tags(tags)
    return _Options(
        kind=kind,
        queue=chosen_queue,
        priority=chosen_priority,
        max_attempts=chosen_attempts,
        run_at=_resolve_run_at(run_at),
        metadata_json=to_json_text(meta, field="metadata"),
        metadata=meta,
        tags=tag_tuple,
    )


def _bind(kind: str, job: Job[Any, Any] | None, args: Mapping[str, Any] | None) -> BoundArgs:
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise InvalidJob(
            f"args must be a dict of argument name to value for job {kind!r}, got {args!r}",
            field="args",
        )
    if job is not None:
        return job.bind(args)
    # No handler in this process: only the JSON contract can be checked.
    plain = dict(args)
    return BoundArgs(plain, to_json_text(plain, field="args"))


def _bind_each(
    kind: str, job: Job[Any, Any] | None, arg_dicts: Iterable[Mapping[str, Any] | None]
) -> Iterator[BoundArgs]:
    """``_bind`` of each dict of a batch; a refusal names its position (``args_list[3].x``)."""
    for position, args in enumerate(arg_dicts):
        try:
            yield _bind(kind, job, args)
        except InvalidJob as refusal:
            raise moved(refusal, "args", f"args_list[{position}]") from None


def _chosen_unique(job: Job[Any, Any] | None, unique: Unique | None) -> Unique | None:
    chosen = unique if unique is not None else (job.unique if job is not None else None)
    if chosen is not None and not isinstance(chosen, Unique):
        raise InvalidJob(f"unique must be an awa.Unique, got {chosen!r}", field="unique")
    return chosen


@dataclass(frozen=True, slots=True, kw_only=True)
class _UniqueBatch:
    """The unique keys of a batch of jobs, locked in the caller's transaction until it ends.

    ``fresh`` lists the positions to enqueue: their key is free and not already taken by an
    earlier position of the batch. The other positions resolve to the job holding their key.
    """

    unique: Unique
    options: _Options
    keys: list[UniqueKey]
    held: dict[bytes, int]
    fresh: list[int]

    @classmethod
    def lock(
        cls,
        cursor: CursorWrapper,
        unique: Unique,
        options: _Options,
        args_list: Sequence[Mapping[str, Any]],
        on_conflict: OnConflict,
    ) -> _UniqueBatch:
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
        held = lock_unique_keys(cursor, sorted(first))
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
            record_unique_claims(
                cursor,
                keys=[self.keys[p].digest for p in self.fresh],
                job_ids=job_ids,
                kind=self.options.kind,
                queue=self.options.queue,
                states=self.unique.states,
                expires_at=self.keys[0].expires_at,
            )

    def result(self, job_ids: Sequence[int]) -> list[int]:
        """The job id of every position: its own new job, or the one holding its key."""
        new = {self.keys[p].digest: job_id for p, job_id in zip(self.fresh, job_ids, strict=True)}
        return [self.held.get(key.digest, new.get(key.digest, 0)) for key in self.keys]


def announce_enqueued(alias: str, job_ids: list[int], *, kind: str, queue: str) -> None:
    """Count jobs enqueued in the current transaction of ``alias`` and send ``job_enqueued``
    for them, both once it commits (never for jobs that rolled back)."""
    if not job_ids:
        return
    telemetry = get_telemetry()
    if telemetry.enabled:
        transaction.on_commit(
            partial(telemetry.enqueued, kind=kind, queue=queue, count=len(job_ids)), using=alias
        )
    if job_enqueued.has_listeners():
        # send_robust: the jobs are committed by now, so a receiver that raises is logged
        # (by Django) instead of failing the caller's commit or starving the other receivers.
        transaction.on_commit(
            partial(job_enqueued.send_robust, sender=Job, job_ids=job_ids, kind=kind, queue=queue),
            using=alias,
        )


def enqueue(
    kind_or_job: str | Job[Any, Any],
    *,
    args: Mapping[str, Any] | None = None,
    queue: str | None = None,
    priority: int | None = None,
    run_at: RunAt = None,
    max_attempts: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    tags: Sequence[str] | None = None,
    unique: Unique | None = None,
    on_conflict: OnConflict = "raise",
    ordering_key: str | None = None,
    eager: bool | None = None,
) -> int:
    """Enqueue one job in the current transaction and return its id.

    ``run_at`` in the future (a datetime, or a timedelta from now) schedules the job; otherwise
    it is runnable as soon as the transaction commits. ``unique`` (default: the job's own)
    deduplicates: while a job with the same key is in a covered state, this raises
    ``UniqueConflict``, or with ``on_conflict="return"`` returns that job's id. Jobs with the
    same ``ordering_key`` go to the same enqueue shard of their queue, so they are claimed in
    enqueue order even when the queue is split into shards (docs/scheduling.md). ``eager``
    (default ``AWA["EAGER"]``) runs it in this process once the transaction commits
    (docs/testing.md#eager-mode).
    """
    kind, job = _resolve_job(kind_or_job)
    bound = _bind(kind, job, args)
    chosen_unique = _chosen_unique(job, unique)
    conflict = check_on_conflict(on_conflict)
    options = _options(
        kind,
        job,
        queue_name=queue,
        priority=priority,
        max_attempts=max_attempts,
        run_at=run_at,
        metadata=metadata,
        tags=tags,
        ordering_key=ordering_key,
    )
    return _enqueue_one(kind, job, bound, options, chosen_unique, conflict, eager)


def enqueue_at_lane_priority(
    kind_or_job: str | Job[Any, Any],
    *,
    args: Mapping[str, Any] | None,
    queue: str,
    priority: int,
    run_at: RunAt,
    max_attempts: int | None,
    metadata: Mapping[str, Any],
    tags: Sequence[str],
    eager: bool | None,
) -> int:
    """``enqueue`` at any stored lane priority, ``STORED_PRIORITY_MIN..MAX``, not only the
    native 1..4: how the django.tasks backend stores Django's -100..100 (awa_django.priorities).
    """
    kind, job = _resolve_job(kind_or_job)
    bound = _bind(kind, job, args)
    options = _options(
        kind,
        job,
        queue_name=queue,
        priority=priority,
        max_attempts=max_attempts,
        run_at=run_at,
        metadata=metadata,
        tags=tags,
        priority_range=(STORED_PRIORITY_MIN, STORED_PRIORITY_MAX),
    )
    return _enqueue_one(kind, job, bound, options, _chosen_unique(job, None), "raise", eager)


def _enqueue_one(
    kind: str,
    job: Job[Any, Any] | None,
    bound: BoundArgs,
    options: _Options,
    chosen_unique: Unique | None,
    conflict: OnConflict,
    eager: bool | None,
) -> int:
    """Insert one validated job in the current transaction and announce it."""
    alias = get_settings().DATABASE_ALIAS
    new_job = NewJob(
        kind=kind,
        queue=options.queue,
        priority=options.priority,
        args_json=bound.json,
        max_attempts=options.max_attempts,
        run_at=options.run_at,
        metadata_json=options.metadata_json,
        tags=options.tags,
    )
    if chosen_unique is None:
        with connections[alias].cursor() as cursor:
            job_id = queue_storage.enqueue_job(cursor, new_job)
    else:
        # The key stays locked until the caller's transaction ends, so a concurrent producer of
        # the same key waits and then sees this job's claim.
        with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
            batch = _UniqueBatch.lock(cursor, chosen_unique, options, [bound.args], conflict)
            if not batch.fresh:
                return batch.result([])[0]
            job_id = queue_storage.enqueue_job(cursor, new_job)
            batch.record(cursor, [job_id])
    announce_enqueued(alias, [job_id], kind=options.kind, queue=options.queue)
    _maybe_eager(alias, options, [job_id], eager)
    return job_id


def _maybe_eager(alias: str, options: _Options, job_ids: list[int], eager: bool | None) -> None:
    if not (get_settings().EAGER if eager is None else eager):
        return
    if options.run_at is not None and options.run_at > timezone.now():
        return  # scheduled: a worker (or run_jobs) runs it when it is due
    run_after_commit(alias, options.queue, job_ids)


def enqueue_on_commit(
    kind_or_job: str | Job[Any, Any],
    *,
    args: Mapping[str, Any] | None = None,
    queue: str | None = None,
    priority: int | None = None,
    run_at: RunAt = None,
    max_attempts: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    tags: Sequence[str] | None = None,
    using: str | None = None,
    ordering_key: str | None = None,
) -> None:
    """Validate now and enqueue after the current transaction commits (opt-in deferral).

    ``using`` names the database alias whose transaction to wait for (Django's default alias
    when None). Use it when the business transaction runs on a different database than the
    queue; when they share one, ``enqueue`` inside the transaction is the safer choice: the
    job then commits or rolls back with the business rows.
    """
    kind, job = _resolve_job(kind_or_job)
    bound = _bind(kind, job, args)
    _options(
        kind,
        job,
        queue_name=queue,
        priority=priority,
        max_attempts=max_attempts,
        run_at=run_at,
        metadata=metadata,
        tags=tags,
        ordering_key=ordering_key,
    )
    transaction.on_commit(
        partial(
            enqueue,
            kind_or_job,
            # A unique job's duplicate is dropped: there is no caller left to raise to.
            on_conflict="return",
            args=bound.args,
            queue=queue,
            priority=priority,
            run_at=run_at,
            max_attempts=max_attempts,
            metadata=metadata,
            tags=tags,
            ordering_key=ordering_key,
        ),
        using=using,
    )


def enqueue_many(
    kind_or_job: str | Job[Any, Any],
    args_list: Iterable[Mapping[str, Any]],
    *,
    queue: str | None = None,
    priority: int | None = None,
    run_at: RunAt = None,
    max_attempts: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    tags: Sequence[str] | None = None,
    unique: Unique | None = None,
    on_conflict: OnConflict = "raise",
    ordering_key: str | None = None,
    eager: bool | None = None,
) -> list[int]:
    """Enqueue one job per argument dict with a single COPY; returns the ids in order.

    If any argument dict is invalid, ``InvalidJob`` names it and nothing is written. All jobs
    share one lane (on a sharded queue: the shard of ``ordering_key``, or one picked at random),
    so the batch reserves its positions with one lock and one round trip. With ``unique`` (or a
    unique job), a job whose key is held raises ``UniqueConflict`` and nothing is written; with
    ``on_conflict="return"`` its position gets the holder's id (or the id of the earlier job of
    the batch with the same key).
    """
    kind, job = _resolve_job(kind_or_job)
    chosen_unique = _chosen_unique(job, unique)
    conflict = check_on_conflict(on_conflict)
    options = _options(
        kind,
        job,
        queue_name=queue,
        priority=priority,
        max_attempts=max_attempts,
        run_at=run_at,
        metadata=metadata,
        tags=tags,
        ordering_key=ordering_key,
    )
    if isinstance(args_list, str | bytes | Mapping) or not isinstance(args_list, Iterable):
        raise InvalidJob(
            f"args_list must be a list of argument dicts, got {args_list!r}", field="args_list"
        )
    arg_dicts = list(args_list)
    if not arg_dicts:
        return []
    alias = get_settings().DATABASE_ALIAS
    now = timezone.now()
    batch: _UniqueBatch | None = None
    with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
        if chosen_unique is None:
            # Bound while the COPY streams, so the server stores rows on its own core while the
            # next ones are checked. An invalid argument raises inside the COPY, which aborts
            # it, and the atomic block rolls back the lane reservation: nothing is written.
            count = len(arg_dicts)
            texts: Iterable[str] = (bound.json for bound in _bind_each(kind, job, arg_dicts))
        else:
            bound = list(_bind_each(kind, job, arg_dicts))
            batch = _UniqueBatch.lock(
                cursor, chosen_unique, options, [b.args for b in bound], conflict
            )
            count = len(batch.fresh)
            texts = [bound[p].json for p in batch.fresh]
        if not count:
            job_ids = []
        elif options.run_at is not None and options.run_at > now:
            job_ids = backlog.copy_deferred(
                cursor,
                queue=options.queue,
                priority=options.priority,
                kind=kind,
                args_json=texts,
                count=count,
                max_attempts=options.max_attempts,
                metadata_json=options.metadata_json,
                tags=options.tags,
                run_at=options.run_at,
                now=now,
            )
        else:
            job_ids = queue_storage.copy_ready(
                cursor,
                queue=options.queue,
                priority=options.priority,
                kind=kind,
                args_json=texts,
                count=count,
                max_attempts=options.max_attempts,
                metadata_json=options.metadata_json,
                tags=options.tags,
                run_at=options.run_at or now,
                now=now,
                ordering_key=ordering_key,
            )
        if batch is not None:
            batch.record(cursor, job_ids)
    announce_enqueued(alias, job_ids, kind=options.kind, queue=options.queue)
    if job_ids:
        _maybe_eager(alias, options, job_ids, eager)
    return job_ids if batch is None else batch.result(job_ids)


provide_enqueue(
    EnqueueFunctions(
        enqueue=enqueue, enqueue_on_commit=enqueue_on_commit, enqueue_many=enqueue_many
    )
)
