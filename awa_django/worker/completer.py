"""Writes completions in batches: one guarded statement serves many finished jobs.

Executors ``submit`` completions; a flush task writes whatever has accumulated as soon as the
batch is full or ``flush_s`` after the first item arrived. Stale completions (older run_lease,
or an attempt someone else closed) come back from storage as not-closed and are logged, never
raised. A batch that fails for a transient reason is written again with backoff; one the
database refuses for what some completions hold is split down to those (``worker.isolation``),
which are replaced by failures that say why. At shutdown, writes still failing at its deadline
are given up, their attempts left to rescue.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from operator import attrgetter
from typing import Any, Final

from psycopg_pool import AsyncConnectionPool

from awa_django.core.closed_attempts import report_closed
from awa_django.core.completion import Completion, result_to_completion
from awa_django.core.events import wait_for_any
from awa_django.core.handler_result import HandlerResult
from awa_django.core.outcome import OutcomeCounts, outcome_word
from awa_django.core.retry import RetryPolicy
from awa_django.exceptions import UnstorableAttempt
from awa_django.logs import job_extra
from awa_django.storage.execution import Closed, close_attempts
from awa_django.storage.queue import notify_queues
from awa_django.storage.statement import run_async
from awa_django.worker.isolation import refusal_reason, write_apart

logger = logging.getLogger(__name__)

# A written completion's outcome and queue, read without a Python call per attempt.
_OUTCOME_AND_QUEUE: Final = attrgetter("outcome", "queue")
# Backoff between attempts at a batch that failed for a transient reason.
RETRY_FIRST_S: Final = 0.1
RETRY_MAX_S: Final = 5.0
# How long a write that began before the shutdown deadline may run on past it.
LAST_WRITE_S: Final = 5.0


class Completer:
    """Batches completions and writes them on a pooled connection."""

    name = "completer"

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        *,
        batch_size: int,
        flush_s: float,
        policy: RetryPolicy,
        now: Callable[[], datetime],
        wake_after_close: frozenset[str] = frozenset(),
        dlq_queues: frozenset[str] = frozenset(),
        deadline: Callable[[], float | None] = lambda: None,
    ) -> None:
        self._pool = pool
        # The process's shutdown deadline, read when it stops (see ``stop``).
        self._shutdown_deadline = deadline
        # Queues whose terminal failures go to the dead-letter queue, counted as such.
        self._dlq_queues = dlq_queues
        # Sequential-lane queues: a closed attempt frees its lane, so every worker of the queue
        # is woken instead of waiting for its next poll.
        self._wake_after_close = wake_after_close
        self._batch_size = batch_size
        self._flush_s = flush_s
        # For closing an attempt whose completion the database refuses.
        self._policy = policy
        self._now = now
        self._pending: list[Completion] = []
        self._arrived = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        # Event-loop time after which a failing write is given up (set by stop), and its signal.
        self._deadline: float | None = None
        self._deadline_set = asyncio.Event()
        self._writing = 0  # completions of the batch being written
        # Attempts closed by ``supersede`` whose handlers have not reported yet.
        self._superseded: set[tuple[int, int]] = set()
        # Attempts this worker was told were closed elsewhere (a cancel, a rescue, a callback):
        # their handlers' completions are stale by design, logged at INFO rather than WARNING.
        self._closed_elsewhere: set[tuple[int, int]] = set()
        self.stale_count = 0
        # The attempts written, by outcome word (see ``closed_counts``).
        self._closed: Counter[str] = Counter()
        # Completions given up at the shutdown deadline: their attempts are left to rescue.
        self.unwritten_count = 0

    @property
    def written_count(self) -> int:
        return sum(self._closed.values())

    @property
    def closed_counts(self) -> OutcomeCounts:
        """The attempts this completer closed, by outcome (``dlq``: held in the dead-letter
        queue, as ``dlq_queues`` says)."""
        return OutcomeCounts.of(self._closed)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="awa-completer")

    def submit(self, completion: Completion) -> None:
        if self._superseded:
            key = (completion.job_id, completion.run_lease)
            if key in self._superseded:
                self._superseded.discard(key)
                self._stale(completion)
                return
        self._queue(completion)

    def expect_stale(self, job_id: int, run_lease: int) -> None:
        """The attempt was closed elsewhere and its worker told: its completion is stale."""
        self._closed_elsewhere.add((job_id, run_lease))

    def supersede(self, completion: Completion) -> None:
        """Close an attempt whose handler still runs (its heartbeat was refused): the handler's
        own completion, when it comes, is stale and is not sent, and if it came meanwhile and
        waits to be written, it closes the attempt instead. Either way one batch never holds
        two completions of one attempt, which its close statement could not tell apart."""
        key = (completion.job_id, completion.run_lease)
        if any((c.job_id, c.run_lease) == key for c in self._pending):
            return
        self._queue(completion)
        self._superseded.add(key)

    def _queue(self, completion: Completion) -> None:
        # Only the first completion since the flush task last emptied the list needs the
        # signals: while the list holds any, ``_arrived`` is set or the flush task is writing
        # and takes whatever it finds before it sets ``_idle``.
        if not self._pending:
            self._idle.clear()
            self._arrived.set()
        self._pending.append(completion)

    async def drain(self) -> None:
        """Wait until everything submitted so far is written."""
        await self._idle.wait()

    async def stop(self, deadline: float | None = None) -> None:
        """Write what is pending, then end the flush task. With a ``deadline`` (event-loop
        time; by default the process's shutdown deadline, if it has one), a write still
        failing then is given up, and one still running ``LAST_WRITE_S`` later is cut off:
        their attempts stay open and are rescued like a stopped worker's, and a database that
        refuses or hangs cannot hold the shutdown."""
        if deadline is None:
            deadline = self._shutdown_deadline()
        if deadline is None:
            await self.drain()
        else:
            self._deadline = deadline
            self._deadline_set.set()
            left = deadline - asyncio.get_running_loop().time()
            try:
                await asyncio.wait_for(self.drain(), timeout=max(left, 0.0) + LAST_WRITE_S)
            except TimeoutError:
                self.unwritten_count += len(self._pending) + self._writing
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.unwritten_count:
            logger.warning(
                "shutdown deadline: completions not written, their attempts are left to rescue "
                "count=%s",
                self.unwritten_count,
            )

    async def _run(self) -> None:
        while True:
            await self._arrived.wait()
            if len(self._pending) < self._batch_size:
                await asyncio.sleep(self._flush_s)
            self._arrived.clear()
            while self._pending:
                batch = self._pending[: self._batch_size]
                del self._pending[: self._batch_size]
                self._writing = len(batch)
                await self._write(batch)
                self._writing = 0
            if not self._pending:
                self._idle.set()

    async def _write(self, batch: list[Completion]) -> None:
        landed, closed = await self._land(batch)
        written = [c for c in landed if (c.job_id, c.run_lease) in closed]
        freed = sorted({c.queue for c in written if c.queue in self._wake_after_close})
        if freed:
            try:
                async with self._pool.connection() as conn:
                    await run_async(conn, notify_queues(freed))
            except Exception:
                # The closures are written; the workers find the freed lanes at their next poll.
                logger.exception("waking sequential queues failed queues=%s", freed)
        # Counted by outcome and queue, then worded: no Python call per attempt.
        for (outcome, queue), count in Counter(map(_OUTCOME_AND_QUEUE, written)).items():
            self._closed[outcome_word(outcome, dlq=queue in self._dlq_queues)] += count
        if len(written) < len(landed):
            for completion in landed:
                if (completion.job_id, completion.run_lease) not in closed:
                    self._stale(completion)
        if self._closed_elsewhere:
            # A close notice that came after its completion was written needs no keeping.
            for completion in landed:
                self._closed_elsewhere.discard((completion.job_id, completion.run_lease))
        await report_closed(landed, closed, rescue_reasons={})

    def _stale(self, completion: Completion) -> None:
        self.stale_count += 1
        key = (completion.job_id, completion.run_lease)
        told = key in self._closed_elsewhere
        self._closed_elsewhere.discard(key)
        logger.log(
            logging.INFO if told else logging.WARNING,
            "stale completion ignored job_id=%s run_lease=%s outcome=%s%s",
            completion.job_id,
            completion.run_lease,
            completion.outcome.value,
            " (the attempt was closed elsewhere: cancelled, rescued or resolved)" if told else "",
            extra=job_extra(completion, outcome=completion.outcome.value),
        )

    async def _land(self, batch: list[Completion]) -> tuple[list[Completion], Closed]:
        """Write ``batch``; returns the completions written (some replaced, below) and what
        closed. A completion the database refuses on its own is replaced by one that closes
        its attempt as failed with the reason, and nothing it could not store; the rest of the
        batch lands. Transient failures are retried with backoff, until the shutdown deadline:
        nothing is dropped before it, since every write is idempotent under the run_lease guard
        and a dropped one would leave its attempt open until rescue ran it again."""
        landed: list[Completion] = []
        closed = Closed()
        # The completions replaced so far, by attempt.
        originals: dict[tuple[int, int], Completion] = {}
        pending = batch
        delay = RETRY_FIRST_S
        while pending:
            split = await write_apart(pending, self._close)
            for items, answer in split.written:
                landed += items
                closed.merge(answer)
            pending = split.unwritten
            error = split.error
            for completion, exc in split.refused:
                key = (completion.job_id, completion.run_lease)
                original = originals.pop(key, None)
                if original is not None:
                    # Even the replacement, which carries nothing of the handler's, was refused:
                    # the database refuses these writes whatever they hold (a permission, a
                    # missing function). The handler's own completion is retried like after a
                    # transient failure, and judged afresh then.
                    error = exc
                    pending.append(original)
                    continue
                originals[key] = completion
                pending.append(self._replacement(completion, exc))
            if error is None:
                continue
            logger.error("completion batch failed, retrying size=%s", len(pending), exc_info=error)
            if not await self._pause(delay):
                self.unwritten_count += len(pending)
                break
            delay = min(delay * 2, RETRY_MAX_S)
        return landed, closed

    async def _close(self, completions: list[Completion]) -> Closed:
        async with self._pool.connection() as conn:
            return await run_async(conn, close_attempts(completions))

    def _replacement(self, completion: Completion, exc: Exception) -> Completion:
        reason = refusal_reason(exc)
        logger.error(
            "completion refused by the database, closing the attempt as failed instead "
            "job_id=%s run_lease=%s outcome=%s reason=%s",
            completion.job_id,
            completion.run_lease,
            completion.outcome.value,
            reason,
            extra=job_extra(completion),
        )
        error = UnstorableAttempt(
            f"the database refused to store how this attempt ended "
            f"({completion.outcome.value}): {reason}"
        )
        return result_to_completion(
            completion, HandlerResult(error), now=self._now(), policy=self._policy
        )

    async def _pause(self, delay: float) -> bool:
        """Wait ``delay`` before writing again; False once the shutdown deadline has passed."""
        if self._deadline is None:
            # A shutdown that begins meanwhile ends the wait: its deadline may come sooner.
            await wait_for_any(self._deadline_set, timeout=delay)
        else:
            await asyncio.sleep(min(delay, max(self._time_left(), 0.0)))
        return self._deadline is None or self._time_left() > 0

    def _time_left(self) -> float:
        assert self._deadline is not None
        return self._deadline - asyncio.get_running_loop().time()
