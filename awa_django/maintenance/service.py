"""The one loop every maintenance task runs in, and the shape a task has.

A task is an object with a ``name``, an ``interval_s`` and an ``async run_once()`` that does
one pass and returns a small result (a dataclass) whose ``changed`` says whether anything
happened and whose ``describe()`` says what, in words. The loop waits out a jittered interval
(or stops early), checks leadership, runs one pass, logs one line (INFO when something changed,
DEBUG otherwise; the result's fields are its ``extra``), and logs the exception and carries on
when a pass fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import Field, asdict, dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from psycopg_pool import AsyncConnectionPool

logger = logging.getLogger(__name__)


class PassResult(Protocol):
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    @property
    def changed(self) -> bool: ...

    def describe(self) -> str:
        """What the pass did, in words ("moved 3 due jobs into the ready queue")."""
        ...


class Counts:
    """A pass result whose fields are all counts: it changed something when one is above zero."""

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    @property
    def changed(self) -> bool:
        return any(getattr(self, name) for name in self.__dataclass_fields__)


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, in the plural unless there is one: "1 job", "3 jobs"."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskConfig:
    """What every maintenance task's config holds: how often its pass runs."""

    interval_s: float


C = TypeVar("C", bound=TaskConfig)


class PoolTask(Generic[C]):
    """A task whose passes take connections from the maintenance pool, every
    ``config.interval_s``; ``config`` holds what its passes need."""

    def __init__(self, pool: AsyncConnectionPool[Any], config: C) -> None:
        self._pool = pool
        self._config = config
        self.interval_s = config.interval_s


class MaintenanceTask(Protocol):
    name: str
    interval_s: float

    async def run_once(self) -> PassResult: ...


async def run_task(
    task: MaintenanceTask,
    *,
    is_leader: Callable[[], bool],
    stopping: asyncio.Event,
    jitter: float = 0.1,
) -> None:
    """Run ``task`` every ``interval_s`` (±jitter) while this process leads, until stopping."""
    while not stopping.is_set():
        delay = task.interval_s * (1 + jitter * (2 * random.random() - 1))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), timeout=delay)
        if stopping.is_set() or not is_leader():
            continue
        started = time.monotonic()
        try:
            result = await task.run_once()
        except Exception:
            logger.exception("maintenance pass failed task=%s", task.name)
            continue
        level = logging.INFO if result.changed else logging.DEBUG
        if logger.isEnabledFor(level):
            duration_ms = round((time.monotonic() - started) * 1000, 1)
            logger.log(
                level,
                "maintenance %s: %s duration_ms=%s",
                task.name,
                result.describe(),
                duration_ms,
                extra={"task": task.name, **asdict(result), "duration_ms": duration_ms},
            )
