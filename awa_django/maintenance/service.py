"""The one loop every maintenance task runs in, and the shape a task has.

A task is an object with a ``name``, an ``interval_s`` and an ``async run_once()`` that does
one pass and returns a small result whose ``changed`` says whether anything happened. The loop
waits out a jittered interval (or stops early), checks leadership, runs one pass, logs INFO when
something changed and DEBUG otherwise, and logs the exception and carries on when a pass fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from typing import Protocol

logger = logging.getLogger(__name__)


class PassResult(Protocol):
    @property
    def changed(self) -> bool: ...


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
        logger.log(
            level,
            "maintenance pass task=%s result=%s duration_ms=%.1f",
            task.name,
            result,
            (time.monotonic() - started) * 1000,
        )
