"""``EnqueueOptions``: how a job is enqueued, as one frozen value, and its validation.

Every way in (``awa.enqueue``, ``enqueue_many``, ``enqueue_on_commit``, ``Job.using``, cron, the
django.tasks backend) builds an ``EnqueueOptions`` and resolves it with ``resolve``: the one
place that applies the job's defaults and ``AWA``'s, and refuses a bad option with
``InvalidJob`` naming it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Protocol, TypedDict, Unpack

from django.conf import settings
from django.utils import timezone

from awa_django.conf import MAX_ATTEMPTS_LIMIT, PRIORITY_MAX, PRIORITY_MIN, get_settings
from awa_django.declarations.exact_json import check_text, path_of, to_json_text
from awa_django.declarations.unique import OnConflict, Unique, check_on_conflict
from awa_django.exceptions import InvalidJob
from awa_django.telemetry import get_telemetry

RunAt = datetime | timedelta | None
MAX_TAGS = 20
MAX_ORDERING_KEY_LENGTH = 200
# Where a job's ordering key travels: awa.enqueue_shard hashes it to pick the lane.
ORDERING_KEY_METADATA = "awa:ordering_key"


class EnqueueOptionArgs(TypedDict, total=False):
    """The fields of ``EnqueueOptions`` as keyword arguments (``awa.enqueue(..., queue=...)``)."""

    queue: str | None
    priority: int | None
    run_at: RunAt
    max_attempts: int | None
    metadata: Mapping[str, Any] | None
    tags: Sequence[str] | None
    unique: Unique | None
    on_conflict: OnConflict | None
    ordering_key: str | None
    eager: bool | None


class HasDefaults(Protocol):
    """A job handler (``awa.Job``): what its enqueues use unless told otherwise."""

    defaults: EnqueueOptions


@dataclass(frozen=True, slots=True, kw_only=True)
class EnqueueOptions:
    """How to enqueue a job; None leaves an option to the job's own default, then ``AWA``'s.

    ``on_conflict`` None is ``"raise"``, except for ``enqueue_on_commit``, where it is
    ``"return"``: at commit there is no caller left to raise to.
    """

    queue: str | None = None
    priority: int | None = None
    run_at: RunAt = None
    max_attempts: int | None = None
    metadata: Mapping[str, Any] | None = None
    tags: Sequence[str] | None = None
    unique: Unique | None = None
    on_conflict: OnConflict | None = None
    ordering_key: str | None = None
    eager: bool | None = None

    def using(self, **changes: Unpack[EnqueueOptionArgs]) -> EnqueueOptions:
        """A copy with ``changes`` applied."""
        return replace(self, **changes) if changes else self

    def resolve(
        self,
        kind: str,
        job: HasDefaults | None,
        *,
        on_conflict: OnConflict = "raise",
        priority_range: tuple[int, int] = (PRIORITY_MIN, PRIORITY_MAX),
        trace_context: Mapping[str, str] | None = None,
    ) -> ResolvedOptions:
        """These options for a job of ``kind`` over the defaults of its handler ``job`` (None: no
        handler in this process), validated; ``on_conflict`` is the call's default.
        ``trace_context`` is the enqueue site's trace context when the caller captured it
        already (``capture_trace_context``); None captures it here."""
        base = job.defaults if job is not None else NO_OPTIONS
        # Each option is the call's, else the handler's (``is not None``, spelled out: this runs
        # at every enqueue, and a helper would be a call per option).
        unique = self.unique if self.unique is not None else base.unique
        if unique is not None and not isinstance(unique, Unique):
            raise InvalidJob(f"unique must be an awa.Unique, got {unique!r}", field="unique")
        given_conflict = self.on_conflict if self.on_conflict is not None else base.on_conflict
        conflict = check_on_conflict(on_conflict if given_conflict is None else given_conflict)
        conf = get_settings()
        queue = self.queue or base.queue or conf.DEFAULT_QUEUE
        if queue not in conf.QUEUES:
            raise InvalidJob(
                f"queue {queue!r} of job {kind!r} is unknown; declared queues are "
                f"{sorted(conf.QUEUES)} (add it to AWA['QUEUES'])",
                field="queue",
            )
        priority = self.priority if self.priority is not None else base.priority
        priority = check_int(
            conf.DEFAULT_PRIORITY if priority is None else priority,
            name="priority",
            low=priority_range[0],
            high=priority_range[1],
        )
        max_attempts = self.max_attempts if self.max_attempts is not None else base.max_attempts
        max_attempts = check_int(
            conf.DEFAULT_MAX_ATTEMPTS if max_attempts is None else max_attempts,
            name="max_attempts",
            low=1,
            high=MAX_ATTEMPTS_LIMIT,
        )
        metadata = self.metadata if self.metadata is not None else base.metadata
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidJob(f"metadata must be a dict, got {metadata!r}", field="metadata")
        meta = dict(metadata or {})
        ordering_key = self.ordering_key if self.ordering_key is not None else base.ordering_key
        if ordering_key is not None:
            meta[ORDERING_KEY_METADATA] = check_ordering_key(ordering_key)
        # The enqueue site's trace context, so the job's span continues this trace.
        if trace_context is None:
            get_telemetry().inject(meta)
        else:
            meta.update(trace_context)
        tags = check_tags(self.tags if self.tags is not None else base.tags)
        run_at = self.run_at if self.run_at is not None else base.run_at
        return ResolvedOptions(
            kind=kind,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            run_at=resolve_run_at(run_at),
            # Most jobs carry none: its text is known without encoding it.
            metadata_json=to_json_text(meta, field="metadata") if meta else "{}",
            metadata=meta,
            tags=tags,
            unique=unique,
            on_conflict=conflict,
            ordering_key=ordering_key,
            eager=self.eager if self.eager is not None else base.eager,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedOptions:
    """``EnqueueOptions`` with every default applied, validated, as the job is stored."""

    kind: str
    queue: str
    priority: int
    max_attempts: int
    run_at: datetime | None
    metadata_json: str
    metadata: dict[str, Any]
    tags: tuple[str, ...]
    unique: Unique | None
    on_conflict: OnConflict
    ordering_key: str | None
    eager: bool | None

    def runs_eagerly(self) -> bool:
        """Whether the job runs in this process after commit (``eager``, else ``AWA["EAGER"]``)
        and is due by then; a scheduled job is left to a worker (or ``run_jobs``)."""
        if not (get_settings().EAGER if self.eager is None else self.eager):
            return False
        return self.run_at is None or self.run_at <= timezone.now()


# The options of a call that passes none: every default applies.
NO_OPTIONS = EnqueueOptions()


def capture_trace_context() -> dict[str, str]:
    """The active trace context as it goes into a job's metadata (empty when no span is
    active): what several jobs enqueued at one site, a workflow's steps, share."""
    context: dict[str, str] = {}
    get_telemetry().inject(context)
    return context


def check_int(value: object, *, name: str, low: int, high: int) -> int:
    """``value`` if it is an integer ``low..high``, else ``InvalidJob`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidJob(f"{name} must be an integer {low}..{high}, got {value!r}", field=name)
    return value


def check_ordering_key(ordering_key: object) -> str:
    """``ordering_key`` if it is a storable string of 1..200 characters, else ``InvalidJob``."""
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
    return ordering_key


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


def resolve_run_at(run_at: RunAt) -> datetime | None:
    """``run_at`` as an aware datetime (a timedelta counts from now), else ``InvalidJob``."""
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
