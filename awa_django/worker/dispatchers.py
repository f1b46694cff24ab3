"""The dispatchers of one process as one service: their claim loops start together, and stop
together with one drain (stop claiming, wait for in-flight jobs until the shutdown deadline,
abandon the rest to rescue)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator

from awa_django.worker.dispatcher import Dispatcher, ExecutingAttempt
from awa_django.worker.service import Shutdown

logger = logging.getLogger(__name__)


class Dispatchers:
    """Every dispatcher of the process, keyed by queue."""

    name = "dispatchers"

    def __init__(self, shutdown: Shutdown, on_crash: Callable[[], None]) -> None:
        self._shutdown = shutdown
        # A dispatcher only returns when stopping; anything else is a bug that must not leave
        # the process looking alive while claiming nothing: on_crash stops the process.
        self._on_crash = on_crash
        self.by_queue: dict[str, Dispatcher] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.abandoned = 0  # in-flight jobs left running at the shutdown deadline

    def add(self, dispatcher: Dispatcher) -> None:
        self.by_queue[dispatcher.queue] = dispatcher

    def __iter__(self) -> Iterator[Dispatcher]:
        return iter(self.by_queue.values())

    async def start(self) -> None:
        for queue, dispatcher in self.by_queue.items():
            task = asyncio.create_task(
                dispatcher.run(self._shutdown.requested), name=f"awa-dispatch-{queue}"
            )
            task.add_done_callback(self._on_done)
            self._tasks.append(task)

    def _on_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            logger.error(
                "dispatcher crashed, stopping the worker task=%s",
                task.get_name(),
                exc_info=task.exception(),
            )
            self._on_crash()

    async def stop(self) -> None:
        """Stop claiming, then give in-flight jobs until the shutdown deadline to finish."""
        loop = asyncio.get_running_loop()
        deadline = self._shutdown.deadline
        await asyncio.gather(*self._tasks, return_exceptions=True)
        in_flight = [t for d in self for t in d.in_flight]
        if not in_flight:
            return
        logger.info("draining in-flight jobs count=%s", len(in_flight))
        timeout = None if deadline is None else max(deadline - loop.time(), 0)
        _, pending = await asyncio.wait(in_flight, timeout=timeout)
        self.abandoned = len(pending)
        if pending:
            # Their attempts stay open in storage and are rescued like a crashed worker's.
            logger.warning("shutdown timeout, abandoning in-flight jobs count=%s", len(pending))
            for task in pending:
                task.cancel()

    def cancel_in_flight(self) -> None:
        for dispatcher in self:
            dispatcher.cancel_in_flight()

    def poke(self) -> None:
        for dispatcher in self:
            dispatcher.poke()

    def attempts(self) -> Iterator[ExecutingAttempt]:
        for dispatcher in self:
            yield from dispatcher.attempts()

    @property
    def in_flight_count(self) -> int:
        return sum(len(d.in_flight) for d in self)

    @property
    def crashed(self) -> bool:
        """A claim loop ended before the stop (before it, an ended one has crashed)."""
        return not self._shutdown.requested.is_set() and any(t.done() for t in self._tasks)

    @property
    def claimed(self) -> int:
        return sum(d.claimed_count for d in self)

    @property
    def idle(self) -> bool:
        return all(d.idle for d in self)
