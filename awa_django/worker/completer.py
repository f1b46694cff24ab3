"""Writes completions in batches: one guarded statement serves many finished jobs.

Executors ``submit`` completions; a flush task writes whatever has accumulated as soon as the
batch is full or ``flush_s`` after the first item arrived. Stale completions (older run_lease,
or an attempt someone else closed) come back from storage as not-closed and are logged, never
raised.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from django.dispatch import Signal
from psycopg_pool import AsyncConnectionPool

from awa_django import signals
from awa_django.logs import job_extra
from awa_django.storage.execution import Closed, Completion, Outcome, close_attempts
from awa_django.storage.queue import notify_queues
from awa_django.telemetry import get_telemetry

logger = logging.getLogger(__name__)

_OUTCOME_SIGNALS: dict[Outcome, Signal] = {
    Outcome.RETRYABLE: signals.job_retried,
    Outcome.SNOOZED: signals.job_snoozed,
    Outcome.FAILED: signals.job_failed,
    Outcome.CANCELLED: signals.job_cancelled,
}


def _signal_kwargs(completion: Completion, closed: Closed) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "job_id": completion.job_id,
        "run_lease": completion.run_lease,
        "kind": completion.kind,
        "queue": completion.queue,
        "attempt": completion.attempt,
    }
    if completion.outcome in (Outcome.RETRYABLE, Outcome.SNOOZED):
        kwargs["run_at"] = closed[(completion.job_id, completion.run_lease)]
    if completion.outcome is Outcome.CANCELLED:
        kwargs["reason"] = (completion.error or {}).get("reason", "")
    elif completion.outcome in (Outcome.RETRYABLE, Outcome.FAILED):
        kwargs["error"] = completion.error
    return kwargs


async def report_closed(
    completions: list[Completion], closed: Closed, *, rescue_reasons: dict[int, str]
) -> None:
    """Count and announce the attempts of ``completions`` that actually ``closed`` (written,
    hence committed: worker writes are autocommit). ``rescue_reasons`` maps the job ids the
    leader rescued to why; stale completions are never reported."""
    written = [c for c in completions if (c.job_id, c.run_lease) in closed]
    get_telemetry().closed(written, rescued=rescue_reasons.keys())
    for completion in written:
        reason = rescue_reasons.get(completion.job_id)
        if reason is not None and signals.job_rescued.has_listeners():
            await signals.send_robust(
                signals.job_rescued,
                **_signal_kwargs(completion, closed) | {"reason": reason},
                outcome=completion.outcome.value,
            )
        signal = _OUTCOME_SIGNALS.get(completion.outcome)
        if signal is not None and signal.has_listeners():
            await signals.send_robust(signal, **_signal_kwargs(completion, closed))


class Completer:
    """Batches completions and writes them on a pooled connection."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        *,
        batch_size: int,
        flush_s: float,
        wake_after_close: frozenset[str] = frozenset(),
    ) -> None:
        self._pool = pool
        # Sequential-lane queues: a closed attempt frees its lane, so every worker of the queue
        # is woken instead of waiting for its next poll.
        self._wake_after_close = wake_after_close
        self._batch_size = batch_size
        self._flush_s = flush_s
        self._pending: list[Completion] = []
        self._arrived = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self.stale_count = 0
        self.written_count = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="awa-completer")

    def submit(self, completion: Completion) -> None:
        self._pending.append(completion)
        self._idle.clear()
        self._arrived.set()

    async def drain(self) -> None:
        """Wait until everything submitted so far is written."""
        await self._idle.wait()

    async def stop(self) -> None:
        await self.drain()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            await self._arrived.wait()
            if len(self._pending) < self._batch_size:
                await asyncio.sleep(self._flush_s)
            self._arrived.clear()
            while self._pending:
                batch = self._pending[: self._batch_size]
                del self._pending[: self._batch_size]
                await self._write(batch)
            if not self._pending:
                self._idle.set()

    async def _write(self, batch: list[Completion]) -> None:
        # A failed write is retried until it lands: dropping it would leave the attempts open
        # until rescue, and every write is idempotent under the run_lease guard.
        delay = 0.1
        while True:
            try:
                async with self._pool.connection() as conn:
                    closed = await close_attempts(conn, batch)
                break
            except Exception:
                logger.exception("completion batch failed, retrying size=%s", len(batch))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        self.written_count += len(closed)
        freed = sorted(
            {
                c.queue
                for c in batch
                if c.queue in self._wake_after_close and (c.job_id, c.run_lease) in closed
            }
        )
        if freed:
            try:
                async with self._pool.connection() as conn:
                    await notify_queues(conn, freed)
            except Exception:
                # The closures are written; the workers find the freed lanes at their next poll.
                logger.exception("waking sequential queues failed queues=%s", freed)
        for completion in batch:
            if (completion.job_id, completion.run_lease) not in closed:
                self.stale_count += 1
                logger.warning(
                    "stale completion ignored job_id=%s run_lease=%s outcome=%s",
                    completion.job_id,
                    completion.run_lease,
                    completion.outcome.value,
                    extra=job_extra(completion),
                )
        await report_closed(batch, closed, rescue_reasons={})
