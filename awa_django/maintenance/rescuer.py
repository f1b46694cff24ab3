"""Rescue (leader task): attempts past their hard deadline, silent beyond the heartbeat
staleness window, or waiting on a callback past its timeout, are closed and their jobs made
retryable (or failed when out of attempts).

The attempt is closed through the same guarded statement a worker uses, so if its worker
completes it at the same moment exactly one of the two closures lands, and a later completion
from the rescued attempt is stale. Closed attempts are announced on ``awa_cancel`` so a worker
that still runs one raises its cancel flag.

A pass looks only at what may have become due since the last complete pass (``RescueCursor``,
kept in memory): the attempts holding a lease, and the receipts claimed or due since then. The
first pass of a process, and any pass after one that hit the batch size, looks further back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool

from awa_django.core.closed_attempts import report_closed
from awa_django.core.completion import result_to_completion
from awa_django.core.handler_result import HandlerResult
from awa_django.core.retry import RetryPolicy
from awa_django.exceptions import AttemptRescued
from awa_django.logs import job_extra
from awa_django.storage.callbacks import lock_timed_out_callbacks
from awa_django.storage.execution import (
    RescueCursor,
    close_attempts,
    find_rescuable,
    notify_cancel,
)

logger = logging.getLogger(__name__)

REASONS = {
    "deadline": "hard deadline exceeded",
    "heartbeat": "heartbeat stale: the worker running this attempt stopped reporting",
    "callback_timeout": "callback timed out: no external result before its timeout",
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
        # None until a pass completes: a new leader looks at every retained receipt once. Kept
        # across leadership changes, since an older cursor only widens the next scan.
        self._cursor: RescueCursor | None = None

    async def run_once(self) -> RescuerResult:
        async with self._pool.connection() as conn:
            scan = await find_rescuable(
                conn, staleness_s=self._staleness_s, limit=self._batch_size, since=self._cursor
            )
            found = scan.found
            # A full batch may have left due attempts unseen: the next pass starts where this
            # one did. Otherwise it may start at this pass's cutoffs once these are closed.
            advance = len(found) < self._batch_size
            if not found:
                self._cursor = scan.next_cursor
                return RescuerResult(0, 0)
            now = self._now()
            async with conn.transaction():
                # An external resolution holds the lease of its callback while it closes the
                # attempt; take the same lock first (skipping held ones until the next pass) so
                # the two never wait on each other the other way round.
                waiting = [
                    (i.job.job_id, i.job.run_lease) for i in found if i.reason == "callback_timeout"
                ]
                if waiting:
                    locked = await lock_timed_out_callbacks(conn, waiting)
                    found = [
                        i
                        for i in found
                        if i.reason != "callback_timeout"
                        or (i.job.job_id, i.job.run_lease) in locked
                    ]
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
        if advance:
            self._cursor = scan.next_cursor
        reasons = {item.job.job_id: item.reason for item in found}
        for completion in completions:
            if (completion.job_id, completion.run_lease) in closed:
                logger.warning(
                    "attempt rescued job_id=%s reason=%s outcome=%s",
                    completion.job_id,
                    reasons[completion.job_id],
                    completion.outcome.value,
                    extra=job_extra(completion),
                )
        await report_closed(completions, closed, rescue_reasons=reasons)
        return RescuerResult(len(found), len(closed))
