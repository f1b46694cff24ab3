"""Rescue (leader task): attempts silent beyond the heartbeat staleness window, or waiting on a
callback past its timeout, are closed and their jobs made retryable (or failed when out of
attempts). Deadlines are not the leader's: the worker running an attempt stops it at its
deadline (``worker.deadline``), so an attempt whose worker still heartbeats is never rescued.

The attempt is closed through the same guarded statement a worker uses, so if its worker
completes it at the same moment exactly one of the two closures lands, and a later completion
from the rescued attempt is stale. Closed attempts are announced on ``awa_cancel`` so a worker
that still runs one raises its cancel flag.

A pass looks only at what may have become due since the last complete pass (``RescueCursor``,
kept in memory): the attempts holding a lease, and the receipts claimed since then. The
first pass of a process, and any pass after one that hit the batch size, looks further back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from awa_django.conf import AwaSettings
from awa_django.core.claimed_job import ClaimedJob, claimed_job_rows
from awa_django.core.closed_attempts import report_closed
from awa_django.core.completion import Completion, result_to_completion
from awa_django.core.handler_result import HandlerResult
from awa_django.core.outcome import outcome_word
from awa_django.core.retry import RetryPolicy
from awa_django.exceptions import AttemptRescued
from awa_django.logs import job_extra
from awa_django.maintenance.service import PoolTask, TaskConfig, counted
from awa_django.storage.callbacks import lock_timed_out_callbacks
from awa_django.storage.execution import (
    Closed,
    Rescuable,
    RescueCursor,
    close_attempts,
    find_rescuable,
    mark_rescued,
    notify_cancel,
)
from awa_django.storage.statement import run_async

logger = logging.getLogger(__name__)

REASONS = {
    "heartbeat": "heartbeat stale: the worker running this attempt stopped reporting",
    "callback_timeout": "callback timed out: no external result before its timeout",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class RescueConfig(TaskConfig):
    staleness_s: float
    batch_size: int
    # Queues whose terminal failures go to the dead-letter queue: a rescue that fails a job
    # there logs its outcome as ``dlq``.
    dlq_queues: frozenset[str] = frozenset()

    @classmethod
    def from_settings(cls, conf: AwaSettings) -> RescueConfig:
        return cls(
            interval_s=conf.RESCUE_INTERVAL_S,
            staleness_s=conf.HEARTBEAT_STALENESS_S,
            batch_size=conf.RESCUE_BATCH_SIZE,
            dlq_queues=conf.dlq_queues,
        )


@dataclass(frozen=True, slots=True)
class RescuerResult:
    found: int
    rescued: int

    @property
    def changed(self) -> bool:
        return self.rescued > 0

    def describe(self) -> str:
        if not self.found:
            return "nothing to rescue"
        rescued = f"rescued {counted(self.rescued, 'attempt')}"
        if self.rescued == self.found:
            return rescued
        return f"{rescued} of {self.found} found (the others closed meanwhile)"


class Rescuer(PoolTask[RescueConfig]):
    """Closes stale attempts and timed-out callback waits, one bounded batch per pass.

    The two rescues are two reasons of one scan rather than two services: one statement
    finds them all and one cursor says where the next pass starts. A pass reads as its steps:
    scan, lock the receipts of timed-out callback waits, close, report.
    """

    name = "rescuer"

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        config: RescueConfig,
        *,
        policy: RetryPolicy,
        now: Callable[[], datetime],
    ) -> None:
        super().__init__(pool, config)
        self._policy = policy
        self._now = now
        # None until a pass completes: a new leader looks at every retained receipt once. Kept
        # across leadership changes, since an older cursor only widens the next scan.
        self._cursor: RescueCursor | None = None

    async def run_once(self) -> RescuerResult:
        async with self._pool.connection() as conn:
            cutoffs, finds = find_rescuable(
                rows=claimed_job_rows,
                staleness_s=self._config.staleness_s,
                limit=self._config.batch_size,
                since=self._cursor,
            )
            # One transaction, so the next cursor's bounds are the cutoffs this scan used.
            async with conn.transaction():
                next_cursor = await run_async(conn, cutoffs)
                found = await run_async(conn, finds)
            # A full batch may have left due attempts unseen: the next pass starts where this
            # one did. Otherwise it may start at this pass's cutoffs once these are closed.
            advance = len(found) < self._config.batch_size
            if not found:
                await self._advance(conn, next_cursor)
                return RescuerResult(0, 0)
            async with conn.transaction():
                found = await self._lock_callback_waits(conn, found)
                completions = self._completions(found)
                closed = await run_async(conn, close_attempts(completions))
                if closed:
                    await run_async(conn, notify_cancel(sorted(closed)))
            if advance:
                await self._advance(conn, next_cursor)
        await self._report(found, completions, closed)
        return RescuerResult(len(found), len(closed))

    async def _advance(self, conn: AsyncConnection[Any], cursor: RescueCursor) -> None:
        """Start the next pass at ``cursor``, and record it (once this pass's closes have
        committed) for the readers of the open attempts, which then skip the receipts it
        settled (``awa.rescue_marks``)."""
        await run_async(conn, mark_rescued(cursor))
        self._cursor = cursor

    async def _lock_callback_waits(
        self, conn: AsyncConnection[Any], found: list[Rescuable[ClaimedJob]]
    ) -> list[Rescuable[ClaimedJob]]:
        """``found`` without the timed-out callback waits whose receipt another transaction
        holds (they are tried again next pass)."""
        # An external resolution holds the lease of its callback while it closes the attempt;
        # take the same lock first so the two never wait on each other the other way round.
        waiting = [(i.job.job_id, i.job.run_lease) for i in found if i.reason == "callback_timeout"]
        if not waiting:
            return found
        locked = await run_async(conn, lock_timed_out_callbacks(waiting))
        return [
            i
            for i in found
            if i.reason != "callback_timeout" or (i.job.job_id, i.job.run_lease) in locked
        ]

    def _completions(self, found: list[Rescuable[ClaimedJob]]) -> list[Completion]:
        now = self._now()
        return [
            result_to_completion(
                item.job,
                HandlerResult(AttemptRescued(REASONS[item.reason])),
                now=now,
                policy=self._policy,
            )
            for item in found
        ]

    async def _report(
        self,
        found: list[Rescuable[ClaimedJob]],
        completions: list[Completion],
        closed: Closed,
    ) -> None:
        reasons = {item.job.job_id: item.reason for item in found}
        for completion in completions:
            if (completion.job_id, completion.run_lease) in closed:
                word = outcome_word(
                    completion.outcome, dlq=completion.queue in self._config.dlq_queues
                )
                logger.warning(
                    "attempt rescued job_id=%s reason=%s outcome=%s",
                    completion.job_id,
                    reasons[completion.job_id],
                    word,
                    extra=job_extra(completion, outcome=word),
                )
        await report_closed(completions, closed, rescue_reasons=reasons)
