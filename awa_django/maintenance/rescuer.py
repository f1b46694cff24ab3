"""Rescue (leader task): attempts past their hard deadline, or silent beyond the heartbeat
staleness window, are closed and their jobs made retryable (or failed when out of attempts).

The attempt is closed through the same guarded statement a worker uses, so if its worker
completes it at the same moment exactly one of the two closures lands, and a later completion
from the rescued attempt is stale. Closed attempts are announced on ``awa_cancel`` so a worker
that still runs one raises its cancel flag.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool

from awa_django.exceptions import AttemptRescued
from awa_django.storage.execution import close_attempts, find_rescuable, notify_cancel
from awa_django.worker.executor import HandlerResult, RetryPolicy, result_to_completion

REASONS = {
    "deadline": "hard deadline exceeded",
    "heartbeat": "heartbeat stale: the worker running this attempt stopped reporting",
}


@dataclass(frozen=True, slots=True)
class RescuerResult:
    found: int
    rescued: int

    @property
    def changed(self) -> bool:
        return self.rescued > 0


class Rescuer:
    """Closes stale and overdue attempts, one bounded batch per pass."""

    name = "rescuer"

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        *,
        interval_s: float,
        staleness_s: float,
        batch_size: int,
        policy: RetryPolicy,
        now: Callable[[], datetime],
    ) -> None:
        self._pool = pool
        self.interval_s = interval_s
        self._staleness_s = staleness_s
        self._batch_size = batch_size
        self._policy = policy
        self._now = now

    async def run_once(self) -> RescuerResult:
        async with self._pool.connection() as conn:
            found = await find_rescuable(
                conn, staleness_s=self._staleness_s, limit=self._batch_size
            )
            if not found:
                return RescuerResult(0, 0)
            now = self._now()
            completions = [
                result_to_completion(
                    item.job,
                    HandlerResult(AttemptRescued(REASONS[item.reason])),
                    now=now,
                    policy=self._policy,
                )
                for item in found
            ]
            closed = await close_attempts(conn, completions)
            await notify_cancel(conn, sorted(closed))
        return RescuerResult(len(found), len(closed))
