"""A process's periodic lock tries on its session connection, in one statement per tick (#37).

Two roles need one holder in the whole fleet and are found by trying a session advisory lock:
the maintenance leader (``maintenance/leader.py``) and each queue's waiting candidate
(``worker/wake.py``). A process that does not hold a role tries it now and then only to find a
holder that died without giving it back. Each role used to keep its own schedule, so an idle
process sent one statement per role and interval, and the fleet's tries grew with its size:
100 processes tried each role 25 times a second.

``SessionTries`` sends all of a process's due tries together: the leader lock and the
candidate locks of every queue it waits on as a non-candidate, in one round trip
(``storage.wake.try_session_locks``). Its interval grows with the number of live processes that
compete for the same roles (``peers``, which the runtime snapshot reports), so the fleet as a
whole tries about once per ``FLEET_TRY_S``, whatever its size:

    interval = min(MAX_INTERVAL_S, max(base_s, FLEET_TRY_S * peers))

and every tick waits a random part of it (between half and all of it), so the processes' tries
spread out instead of bunching. A holder that dies is replaced by whichever survivor ticks first:
with ``peers`` processes trying at random phases, less than ``FLEET_TRY_S`` after its death on
average, and after more than 5 s only with a chance below ``exp(-5 / FLEET_TRY_S)``; never
later than one interval (``base_s`` for a small fleet, ``MAX_INTERVAL_S`` at most). A holder
that stops cleanly gives its locks back and wakes the others at once (no tick involved).
docs/architecture.md, "Session tries", states the same for operators.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from typing import Final

from awa_django.core.events import wait_for_any
from awa_django.storage import control
from awa_django.storage import wake as storage
from awa_django.storage.session import SharedSession
from awa_django.storage.statement import run_async

logger = logging.getLogger(__name__)

# How often the whole fleet tries each role, on average: each process's interval is this times
# the number of processes that compete with it.
FLEET_TRY_S: Final = 0.25
# The longest interval between one process's tries, however large the fleet (or however wrong
# its count of live processes): what bounds failover when few processes remain.
MAX_INTERVAL_S: Final = 60.0
# Each tick waits between this part of the interval and all of it (uniformly).
MIN_JITTER: Final = 0.5


class SessionTries:
    """One process's periodic session lock tries (see the module docstring). The leader elector
    asks with ``try_leader``; a queue's dispatcher waiting on another process's candidacy
    registers with ``wait_candidate`` and is told through ``on_won``."""

    name = "session-tries"

    def __init__(
        self,
        session: SharedSession,
        *,
        base_s: float,
        random_part: Callable[[], float] = random.random,
    ) -> None:
        self._session = session
        self._base_s = base_s
        self._random_part = random_part
        self.peers = 1  # live processes that compete for this one's roles, itself included
        self._leader: tuple[int, asyncio.Future[tuple[bool, int]]] | None = None
        # Queues waiting on another process's candidacy -> what to call when this one wins.
        self._candidates: dict[str, Callable[[], None]] = {}
        # Called with each candidate lock won for a queue no longer waiting (it must go back).
        self.on_unwanted: Callable[[str], None] = lambda queue: None
        self._wanted = asyncio.Event()
        self._first = True

    @property
    def interval_s(self) -> float:
        return min(MAX_INTERVAL_S, max(self._base_s, FLEET_TRY_S * self.peers))

    def set_peers(self, peers: int) -> None:
        self.peers = max(1, peers)

    async def try_leader(self, key: int, stopping: asyncio.Event) -> tuple[bool, int]:
        """Wait for the next tick's try of the leader lock ``key``: (won, the session generation
        it was won in). Raises what the statement raised."""
        future: asyncio.Future[tuple[bool, int]] = asyncio.get_running_loop().create_future()
        self._leader = (key, future)
        self._wanted.set()
        waiter: asyncio.Future[object] = asyncio.ensure_future(stopping.wait())
        result: asyncio.Future[object] = future  # type: ignore[assignment]
        try:
            await asyncio.wait({result, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            if self._leader is not None and self._leader[1] is future:
                self._leader = None
        if not future.done():
            future.cancel()
            return False, 0
        return future.result()

    def wait_candidate(self, queue: str, on_won: Callable[[], None]) -> None:
        """Try ``queue``'s candidate lock with every tick until ``stop_waiting``; ``on_won``
        once it is this session's."""
        self._candidates[queue] = on_won
        self._wanted.set()

    def stop_waiting(self, queue: str) -> None:
        self._candidates.pop(queue, None)

    async def run(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            await wait_for_any(self._wanted, stopping)
            if stopping.is_set():
                return
            if self._first:
                # A process's first try goes at once: a fleet that starts has no leader yet.
                self._first = False
            else:
                part = MIN_JITTER + (1 - MIN_JITTER) * self._random_part()
                await wait_for_any(stopping, timeout=self.interval_s * part)
                if stopping.is_set():
                    return
            await self.tick()

    async def tick(self) -> None:
        """Send the tries that are wanted now, in one statement (none when none is)."""
        leader = self._leader
        queues = sorted(self._candidates)
        if leader is None and not queues:
            self._wanted.clear()
            return
        try:
            async with self._session.use() as conn:
                generation = self._session.generation
                won_leader, won = await run_async(
                    conn,
                    storage.try_session_locks(
                        leader_key=None if leader is None else leader[0], queues=queues
                    ),
                )
        except Exception as error:
            logger.warning("session lock tries failed", exc_info=True)
            if leader is not None and not leader[1].done():
                leader[1].set_exception(error)
            return
        if leader is not None and not leader[1].done():
            leader[1].set_result((won_leader, generation))
        elif won_leader and leader is not None:
            # Nobody waits for the result any more (stopping): give the lock back.
            with contextlib.suppress(Exception):
                async with self._session.use() as conn:
                    await run_async(conn, control.release_leader_lock(key=leader[0]))
        for queue in won:
            callback = self._candidates.pop(queue, None)
            if callback is None:
                self.on_unwanted(queue)
            else:
                callback()
        if self._leader is None and not self._candidates:
            self._wanted.clear()

    # The process root's service protocol (worker.service), by shape.
    _stopped: asyncio.Event | None = None
    _task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._stopped = asyncio.Event()
        self._task = asyncio.create_task(self.run(self._stopped), name="awa-session-tries")

    async def stop(self) -> None:
        if self._stopped is not None and self._task is not None:
            self._stopped.set()
            await asyncio.gather(self._task, return_exceptions=True)
