"""Unique jobs: ``awa.Unique`` options and the key a job is deduplicated by.

The key is a digest of the job's kind plus, as asked, its queue, its arguments (all of them, or
the named ones) and the period bucket the enqueue falls in. While the job holding a key is in
one of the covered ``states``, enqueueing another job with the same key conflicts.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Final, Literal

from awa_django.exceptions import InvalidJob

OnConflict = Literal["raise", "return"]
ON_CONFLICT_CHOICES: Final = ("raise", "return")
# Every state a job can be seen in (awa.get_job(...).state).
JOB_STATES: Final = (
    "scheduled",
    "available",
    "running",
    "retryable",
    "completed",
    "failed",
    "cancelled",
    "dlq",
)
KEY_BYTES: Final = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class Unique:
    """How a job is deduplicated (``@awa.job(unique=...)`` or ``enqueue(..., unique=...)``).

    ``by_args``: True compares all arguments, a sequence of names only those, False none.
    ``by_queue``: jobs on different queues are distinct. ``period``: the key includes the
    period bucket (UTC epoch divided into ``period``-long windows), so one job per window.
    ``states``: the states of the holder job in which a duplicate conflicts; the default holds
    the key from enqueue through completion (until its history is pruned), but not after a
    failure or cancel.
    """

    DEFAULT_STATES: ClassVar[tuple[str, ...]] = (
        "scheduled",
        "available",
        "running",
        "retryable",
        "completed",
    )
    # Only while the job waits or runs: a new one can be enqueued once it finished.
    ACTIVE_STATES: ClassVar[tuple[str, ...]] = ("scheduled", "available", "running", "retryable")

    by_args: bool | Sequence[str] = True
    by_queue: bool = False
    period: timedelta | None = None
    states: Sequence[str] = DEFAULT_STATES

    def __post_init__(self) -> None:
        if not isinstance(self.by_args, bool):
            if isinstance(self.by_args, str) or not all(
                isinstance(name, str) for name in self.by_args
            ):
                raise InvalidJob(
                    f"Unique.by_args must be a bool or a list of argument names, "
                    f"got {self.by_args!r}",
                    field="unique",
                )
            object.__setattr__(self, "by_args", tuple(self.by_args))
        if not isinstance(self.by_queue, bool):
            raise InvalidJob(
                f"Unique.by_queue must be a bool, got {self.by_queue!r}", field="unique"
            )
        if self.period is not None and (
            not isinstance(self.period, timedelta) or self.period.total_seconds() < 1
        ):
            raise InvalidJob(
                f"Unique.period must be a timedelta of at least one second, got {self.period!r}",
                field="unique",
            )
        states = (self.states,) if isinstance(self.states, str) else tuple(self.states)
        unknown = sorted(set(states) - set(JOB_STATES))
        if not states or unknown:
            raise InvalidJob(
                f"Unique.states must be a non-empty list of job states from {list(JOB_STATES)}, "
                f"got {self.states!r}",
                field="unique",
            )
        object.__setattr__(self, "states", tuple(sorted(set(states), key=JOB_STATES.index)))


@dataclass(frozen=True, slots=True)
class UniqueKey:
    """A computed key, and when its period bucket ends (None without a period)."""

    digest: bytes
    expires_at: datetime | None


def unique_key(
    unique: Unique, *, kind: str, queue: str, args: Mapping[str, Any], now: datetime
) -> UniqueKey:
    """The key of a job with these (already validated) values, enqueued at ``now``."""
    if unique.by_args is True:
        chosen_args: dict[str, Any] | None = dict(args)
    elif unique.by_args is False:
        chosen_args = None
    else:
        chosen_args = {name: args[name] for name in unique.by_args if name in args}
    period_s = None if unique.period is None else unique.period.total_seconds()
    bucket = None if period_s is None else math.floor(now.timestamp() / period_s)
    material = json.dumps(
        [kind, queue if unique.by_queue else None, chosen_args, period_s, bucket],
        sort_keys=True,
        separators=(",", ":"),
    )
    expires_at = (
        None
        if period_s is None or bucket is None
        else datetime.fromtimestamp((bucket + 1) * period_s, tz=UTC)
    )
    return UniqueKey(hashlib.sha256(material.encode()).digest()[:KEY_BYTES], expires_at)


def check_on_conflict(on_conflict: object) -> OnConflict:
    if on_conflict not in ON_CONFLICT_CHOICES:
        raise InvalidJob(
            f"on_conflict must be one of {list(ON_CONFLICT_CHOICES)}, got {on_conflict!r}",
            field="on_conflict",
        )
    return on_conflict
