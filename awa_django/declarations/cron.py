"""Declaring periodic jobs: ``@awa.periodic(...)`` and ``AWA["CRON"]``, resolved to schedules.

A declaration is only recorded when the module is imported; it is resolved against settings
(queues, defaults) and the handler's signature when the worker syncs it or ``manage.py check``
runs, so a bad expression, timezone or option is reported with its check id instead of breaking
the import of a jobs module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal

from awa_django.conf import get_settings
from awa_django.declarations.cron_expression import CronExpression
from awa_django.declarations.discovery import ensure_jobs_discovered
from awa_django.declarations.enqueue_options import EnqueueOptions
from awa_django.declarations.jobs import DeclaredJob
from awa_django.declarations.resolve import bind_args, resolve_job
from awa_django.exceptions import InvalidJob, InvalidSchedule

MissedFirePolicy = Literal["coalesce", "catch_up"]
MISSED_FIRE_POLICIES: Final = ("coalesce", "catch_up")
NAME_MAX_LENGTH: Final = 200
DUPLICATE_CHECK: Final = "awa.E033"
SETTINGS_CHECK: Final = "awa.E034"
_SETTINGS_KEYS: Final = frozenset(
    {
        "name",
        "schedule",
        "job",
        "args",
        "timezone",
        "queue",
        "priority",
        "max_attempts",
        "tags",
        "metadata",
        "missed",
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleFields:
    """What a schedule fires, and when: the columns of ``awa.cron_jobs`` that a declaration and
    the stored row (``storage.cron.CronJobRecord``) both carry."""

    name: str
    cron_expr: str
    timezone: str
    kind: str
    queue: str
    args: dict[str, Any]
    priority: int
    max_attempts: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule(ScheduleFields):
    """A resolved, validated schedule: the row a deployment upserts into ``awa.cron_jobs``."""

    tags: tuple[str, ...]
    metadata: dict[str, Any]
    missed_fire_policy: MissedFirePolicy

    def as_row(self) -> dict[str, Any]:
        row = {f.name: getattr(self, f.name) for f in fields(self)}
        row["tags"] = list(self.tags)
        return row


@dataclass(frozen=True, slots=True, kw_only=True)
class Declaration:
    """One schedule as written in code or settings, before resolution. ``origin`` says where,
    for error messages."""

    origin: str
    name: str | None
    schedule: object
    job: DeclaredJob[Any, Any] | str
    args: Mapping[str, Any] | None = None
    timezone: object = "UTC"
    queue: str | None = None
    priority: int | None = None
    max_attempts: int | None = None
    tags: Sequence[str] | None = None
    metadata: Mapping[str, Any] | None = field(default=None)
    missed: object = "coalesce"


class DeclarationRegistry:
    """The ``@awa.periodic`` declarations of this process; tests may ``remove`` what they add."""

    def __init__(self) -> None:
        self._declarations: list[Declaration] = []

    def add(self, declaration: Declaration) -> None:
        self._declarations.append(declaration)

    def remove(self, declaration: Declaration) -> None:
        self._declarations.remove(declaration)

    def __iter__(self) -> Iterator[Declaration]:
        return iter(list(self._declarations))


declarations = DeclarationRegistry()


def _from_settings(index: int, entry: Mapping[str, Any]) -> Declaration:
    origin = f"AWA['CRON'][{index}]"
    unknown = sorted(set(entry) - _SETTINGS_KEYS)
    if unknown:
        raise InvalidSchedule(
            f"{origin} has unknown key(s) {unknown}; known keys: {sorted(_SETTINGS_KEYS)}",
            check_id=SETTINGS_CHECK,
        )
    missing = [key for key in ("name", "schedule", "job") if key not in entry]
    if missing:
        raise InvalidSchedule(f"{origin} is missing {missing}", check_id=SETTINGS_CHECK)
    if not isinstance(entry["job"], str):
        raise InvalidSchedule(
            f"{origin}['job'] must be a job kind string, got {entry['job']!r}",
            check_id=SETTINGS_CHECK,
        )
    options = {
        key: entry[key] for key in _SETTINGS_KEYS - {"name", "schedule", "job"} if key in entry
    }
    return Declaration(
        origin=origin, name=entry["name"], schedule=entry["schedule"], job=entry["job"], **options
    )


def resolve(declaration: Declaration) -> Schedule:
    """The schedule a declaration stands for; raises ``InvalidSchedule`` naming what is wrong."""
    origin = declaration.origin
    expression = _expression(declaration)
    if declaration.missed not in MISSED_FIRE_POLICIES:
        raise InvalidSchedule(
            f"{origin}: missed must be one of {list(MISSED_FIRE_POLICIES)}, "
            f"got {declaration.missed!r}"
        )
    try:
        kind, handler = resolve_job(declaration.job)
        name = kind if declaration.name is None else declaration.name
        if not isinstance(name, str) or not 0 < len(name) <= NAME_MAX_LENGTH:
            raise InvalidJob(
                f"schedule name must be a string of 1..{NAME_MAX_LENGTH} characters, got {name!r}",
                field="name",
            )
        bound = bind_args(kind, handler, declaration.args).args
        options = EnqueueOptions(
            queue=declaration.queue,
            priority=declaration.priority,
            max_attempts=declaration.max_attempts,
            metadata=declaration.metadata,
            tags=declaration.tags,
        ).resolve(kind, handler)
    except InvalidJob as exc:
        raise InvalidSchedule(f"{origin}: {exc}") from None
    return Schedule(
        name=name,
        cron_expr=expression.expr,
        timezone=expression.timezone,
        kind=kind,
        queue=options.queue,
        args=bound,
        priority=options.priority,
        max_attempts=options.max_attempts,
        tags=options.tags,
        # Round-tripped so the stored row compares equal on the next sync.
        metadata=json.loads(options.metadata_json),
        missed_fire_policy=declaration.missed,
    )


def _expression(declaration: Declaration) -> CronExpression:
    try:
        return CronExpression(declaration.schedule, declaration.timezone)  # type: ignore[arg-type]
    except InvalidSchedule as exc:
        raise InvalidSchedule(f"{declaration.origin}: {exc}", check_id=exc.check_id) from None


def all_declarations() -> list[Declaration]:
    """``@awa.periodic`` declarations, then the valid ``AWA["CRON"]`` entries."""
    ensure_jobs_discovered()
    found = list(declarations)
    for index, entry in enumerate(get_settings().CRON):
        try:
            found.append(_from_settings(index, entry))
        except InvalidSchedule:
            continue
    return found


def schedule_problems() -> list[InvalidSchedule]:
    """Everything wrong with the declared schedules (``manage.py check`` reports these)."""
    found: list[InvalidSchedule] = []
    for index, entry in enumerate(get_settings().CRON):
        try:
            _from_settings(index, entry)
        except InvalidSchedule as exc:
            found.append(exc)
    names: dict[str, str] = {}
    for declaration in all_declarations():
        try:
            schedule = resolve(declaration)
        except InvalidSchedule as exc:
            found.append(exc)
            continue
        if schedule.name in names:
            found.append(
                InvalidSchedule(
                    f"schedule name {schedule.name!r} is declared twice, by "
                    f"{names[schedule.name]} and {declaration.origin}; give one a name=",
                    check_id=DUPLICATE_CHECK,
                )
            )
        names[schedule.name] = declaration.origin
    return found


def declared_schedules() -> list[Schedule]:
    """Every declared schedule, resolved; raises ``InvalidSchedule`` on the first problem."""
    problems = schedule_problems()
    if problems:
        raise problems[0]
    return [resolve(declaration) for declaration in all_declarations()]
