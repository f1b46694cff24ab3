"""How a dispatcher that found no work waits for more, and how producers wake it.

A commit that NOTIFYs takes a lock PostgreSQL holds through the commit's WAL flush, one for the
whole server, so producers that all notified would commit one at a time. Producers therefore
notify only while a worker waits: a waiting worker holds its queue's wake lock on the process's
session connection (``WakeLocks``), and a producer's commit that finds no such lock sends
nothing (``awa.publish_ready``). The handshake cannot lose a wake-up: a producer that found no
waiter holds the lock shared until its commit is visible, so a worker that is about to wait gets
the lock only after that commit, and claims once more before it sleeps.

A dispatcher that just had work does not wait at once (``IdleWait``): for a few milliseconds
it polls, every 1, 2, then 4 ms, so a steady stream of jobs is claimed without any notification
and its producers commit in parallel. Only once nothing came for ``HOT_WINDOW_S`` does it take
the wake lock and sleep until a notification or the poll interval. One process per queue holds
the lock (the candidate); the others sleep too. Every listener gets every notification, but
only the candidate claims for a producer's: the others claiming too, nearly all of them for
nothing, was a fleet's thundering herd (#37). A candidate whose claim brings work and leaves it
slots stays the candidate (it only stops the producers' notifications while it polls). One
whose claim fills its slots gives its locks back, which notifies the queue's handover channel:
the others claim and one of them takes over waiting; they need not poll meanwhile, which is
what an idle fleet would otherwise spend its statements on (#37). Only a candidate that dies
without giving its locks back leaves them sleeping, until the process's session tries find its
lock free (``TAKEN_RETRY_POLLS`` poll intervals at most without them).

The candidate's own poll is only the safety net for a notification that got lost (its session
looked up but was not), so it backs off while nothing comes: each empty poll doubles the next
one's wait, up to ``IDLE_POLL_BACKOFF_MAX`` poll intervals, and any wake-up, claimed job or
new wait sets it back to one interval. Poll-only workers (no session, no notification) keep
their interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from typing import Final

from awa_django.core.events import wait_for_any
from awa_django.core.session_tries import SessionTries
from awa_django.storage import wake as storage
from awa_django.storage.session import SharedSession
from awa_django.storage.statement import run_async

logger = logging.getLogger(__name__)

# How long after its last work a dispatcher keeps polling instead of waiting for a notification,
# and its polls' first and longest interval.
HOT_WINDOW_S: Final = 0.01
HOT_FIRST_POLL_S: Final = 0.001
HOT_MAX_POLL_S: Final = 0.004
# When producers were committing as the dispatcher tried to wait: their jobs are about to be
# visible, so it claims again after this long.
BUSY_RETRY_S: Final = 0.002
# A process that is not its queue's candidate tries the candidate lock every this many poll
# intervals, only to find a candidate that died without giving it back: those tries were an
# idle fleet's largest share of statements (100 processes: one a second each, #37).
TAKEN_RETRY_POLLS: Final = 4
# While the wake lock cannot be held (its session or the LISTEN connection is down, so no
# notification would arrive), the dispatcher polls this often.
UNAVAILABLE_POLL_S: Final = 0.05
# A candidate that waits with its session up is woken by the producers' notifications; its poll
# is only the safety net for one that got lost, so each poll that finds nothing doubles the
# next one's wait, up to this many poll intervals, and any wake-up or claimed job sets it back
# to one. The candidates' empty polls were an idle fleet's largest cost with many queues (one
# claim per queue and poll interval, #37).
IDLE_POLL_BACKOFF_MAX: Final = 16


class WakeState(enum.Enum):
    ARMED = "armed"  # this process waits for the queue: commits notify
    BUSY = "busy"  # producers were committing to the queue: claim again shortly
    TAKEN = "taken"  # another process waits for the queue and is woken with this one
    UNAVAILABLE = "unavailable"  # no wake lock without a session, or while not listening


class WakeLocks:
    """This process's wake locks, on its session connection (shared with LISTEN and the leader
    lock): per queue the candidate lock and, while the queue's dispatcher waits, the wake lock."""

    name = "wake-locks"

    def __init__(self, session: SharedSession, *, tries: SessionTries | None = None) -> None:
        self._session = session
        # The process's session tries: a queue whose candidate lock another process holds is
        # tried with them, in one statement with the process's other tries (#37).
        self.tries = tries
        if tries is not None:
            tries.on_unwanted = self._unwanted
        # Queues whose candidate lock the session holds -> whether it holds the wake lock too.
        self._held: dict[str, bool] = {}
        # The session generation the locks in _held were taken in.
        self._generation = 0
        self._releases: set[asyncio.Task[None]] = set()
        # Set when the session's connection is lost (and replaced for the next one): a
        # candidate whose poll backed off waits on it too, since no notification reaches it now.
        self.lost = asyncio.Event()
        session.on_reset(self.forget)

    async def arm(self, queue: str) -> WakeState:
        """Try to wait for ``queue``: on ARMED, commits to it notify from now on."""
        if not self._session.listening.is_set():
            # A notification would reach no one.
            return WakeState.UNAVAILABLE
        try:
            async with self._session.use() as conn:
                generation = self._session.generation
                if generation != self._generation:
                    # A new connection: whatever the old one held went with it.
                    self._held.clear()
                    self._generation = generation
                state = WakeState(
                    await run_async(
                        conn, storage.arm_wake(queue=queue, candidate=queue in self._held)
                    )
                )
                if state is WakeState.TAKEN:
                    self._held.pop(queue, None)
                else:
                    self._held[queue] = state is WakeState.ARMED
                return state
        except Exception:
            logger.warning("wake lock session failed; polling until it is back", exc_info=True)
            self._held.clear()
            return WakeState.UNAVAILABLE

    def disarm(self, queue: str) -> None:
        """Stop waiting for ``queue`` (commits stop notifying) but stay its candidate, without
        waiting for it; nothing to do unless this process waits for it."""
        if self._held.get(queue):
            # Said at once, so that the next arm takes the wake lock again (the statements run
            # in order on the session).
            self._held[queue] = False
            task = asyncio.ensure_future(self._disarm(queue, self._generation))
            self._releases.add(task)
            task.add_done_callback(self._releases.discard)

    async def _disarm(self, queue: str, generation: int) -> None:
        try:
            async with self._session.use() as conn:
                if self._session.generation == generation:
                    await run_async(conn, storage.disarm_wake(queue=queue))
        except Exception:
            logger.warning("wake lock session failed", exc_info=True)
            self._held.clear()

    def release(self, queue: str) -> None:
        """Stop waiting for ``queue`` (commits stop notifying) and stop being its candidate,
        without waiting for it; nothing to do when this process holds neither lock."""
        if queue in self._held:
            task = asyncio.ensure_future(self._release(queue))
            self._releases.add(task)
            task.add_done_callback(self._releases.discard)

    async def _release(self, queue: str) -> None:
        try:
            async with self._session.use() as conn:
                armed = self._held.pop(queue, None)
                if armed is None or self._session.generation != self._generation:
                    return
                await run_async(conn, storage.release_wake(queue=queue, armed=armed))
        except Exception:
            logger.warning("wake lock session failed", exc_info=True)
            self._held.clear()

    async def wait_taken(
        self, queue: str, wakeup: asyncio.Event, stopping: asyncio.Event, tries: SessionTries
    ) -> None:
        """Sleep while another process is ``queue``'s candidate: until a notification, or until
        the session tries win the candidate lock (its holder died without giving it back)."""
        won = asyncio.Event()

        def on_won() -> None:
            self._adopt(queue)
            won.set()

        tries.wait_candidate(queue, on_won)
        try:
            await wait_for_any(wakeup, stopping, won)
        finally:
            tries.stop_waiting(queue)

    def _adopt(self, queue: str) -> None:
        # The session tries won the queue's candidate lock on the current connection.
        if self._session.generation != self._generation:
            self._held.clear()
            self._generation = self._session.generation
        self._held[queue] = False

    def _unwanted(self, queue: str) -> None:
        # Won for a dispatcher that stopped waiting meanwhile: a candidate that does not wait
        # would leave the others asleep, so the lock goes back (waking the queue).
        self._adopt(queue)
        self.release(queue)

    def holds(self, queue: str) -> bool:
        """Whether this process waits for ``queue`` (holds its wake lock), as far as it knows."""
        return self._held.get(queue, False)

    def forget(self) -> None:
        """Drop what the session held, for instance after its connection was lost and came
        back: the server may have restarted, taking the locks with it. Dispatchers then take the
        locks again."""
        self._held.clear()
        self.lost.set()
        self.lost = asyncio.Event()

    async def start(self) -> None:
        """Nothing to open: dispatchers take the locks as they wait."""

    async def stop(self) -> None:
        await self.close()

    async def close(self) -> None:
        """Give every lock back, waking the queues this process waited for so that another
        process takes over waiting (the session's owner closes the connection)."""
        await asyncio.gather(*self._releases, return_exceptions=True)
        if not self._held:
            return
        with contextlib.suppress(Exception):
            async with self._session.use() as conn:
                if self._session.generation == self._generation:
                    # Unlocked before the others wake (release_wake notifies at commit): one
                    # that woke while the locks were still held would find the queue taken and
                    # sleep until its next poll.
                    for queue, armed in sorted(self._held.items()):
                        await run_async(conn, storage.release_wake(queue=queue, armed=armed))
        self._held.clear()


class IdleWait:
    """When one dispatcher claims next after a claim that left it with free permits."""

    def __init__(self, queue: str, locks: WakeLocks | None, *, poll_interval_s: float) -> None:
        self._queue = queue
        self._locks = locks
        self._poll_interval_s = poll_interval_s
        self._last_work = 0.0
        self._hot_poll_s = HOT_FIRST_POLL_S
        self._armed = False
        self._behind = False
        # Poll intervals the next armed sleep waits at most (see IDLE_POLL_BACKOFF_MAX).
        self._backoff = 1

    @property
    def behind_candidate(self) -> bool:
        """Asleep while another process is the queue's candidate: producers' notifications are
        that process's to answer, only its handover wakes this one."""
        return self._behind

    def found_work(self, *, hand_over: bool = True) -> None:
        """The last claim brought jobs (and they have started): poll again soon if it leaves
        permits free, and stop waiting for notifications. ``hand_over``: give the candidacy
        back too, waking the processes asleep behind it (the claim filled its permits: more
        work is likely, and this process may have no slot for it); else stay the candidate, so
        that the next commit wakes this process alone. Giving the locks back here, after the
        jobs started, keeps that round trip off the path from a notification to the handlers."""
        self._last_work = time.monotonic()
        self._hot_poll_s = HOT_FIRST_POLL_S
        self._backoff = 1
        if self._locks is not None:
            self._armed = False
            if hand_over:
                self._locks.release(self._queue)
            else:
                self._locks.disarm(self._queue)

    async def sleep(self, wakeup: asyncio.Event, stopping: asyncio.Event) -> None:
        """Return when the dispatcher should claim again."""
        if self._locks is None:
            await wait_for_any(wakeup, stopping, timeout=self._poll_interval_s)
            return
        if self._armed and self._locks.holds(self._queue):
            # Waiting, and the claim after taking the lock (or after a wake-up that brought
            # nothing) found nothing: sleep until a producer commits. Still waiting afterwards:
            # the locks go back only once a claim brings work (found_work). The poll only
            # catches a lost notification, so it backs off while nothing comes (a lost session
            # ends the sleep: nothing would wake it then).
            await wait_for_any(
                wakeup,
                stopping,
                self._locks.lost,
                timeout=self._poll_interval_s * self._backoff,
            )
            self._backoff = 1 if wakeup.is_set() else min(self._backoff * 2, IDLE_POLL_BACKOFF_MAX)
            return
        self._armed = False
        if time.monotonic() - self._last_work < HOT_WINDOW_S:
            await wait_for_any(wakeup, stopping, timeout=self._hot_poll_s)
            self._hot_poll_s = min(self._hot_poll_s * 2, HOT_MAX_POLL_S)
            return
        while True:
            state = await self._locks.arm(self._queue)
            if state is WakeState.ARMED:
                # Claim once more before sleeping: work committed before the lock was ours sent
                # no notification. A new wait polls at the interval first.
                self._armed = True
                self._backoff = 1
                return
            if state is WakeState.BUSY:
                await wait_for_any(wakeup, stopping, timeout=BUSY_RETRY_S)
                return
            if state is WakeState.UNAVAILABLE:
                await wait_for_any(wakeup, stopping, timeout=UNAVAILABLE_POLL_S)
                return
            # Another process is the candidate: it answers the producers' notifications, and
            # wakes this one when it hands over (release_wake notifies).
            tries = self._locks.tries
            self._behind = True
            try:
                if tries is not None:
                    # Its death, the one thing that would not wake this one, is what the
                    # process's session tries look for, on their schedule (core.session_tries).
                    await self._locks.wait_taken(self._queue, wakeup, stopping, tries)
                    return
                await wait_for_any(
                    wakeup, stopping, timeout=self._poll_interval_s * TAKEN_RETRY_POLLS
                )
            finally:
                self._behind = False
            if wakeup.is_set() or stopping.is_set():
                return
            # The intervals passed without a notification: as long as the candidate lock
            # stays taken, its holder is alive and waiting, so there is nothing to claim;
            # trying the lock again (a statement that costs the server next to nothing) is
            # what finds a candidate that died without giving it back. Claiming here instead
            # was an idle fleet's largest cost: one claim per process and poll interval (#37).
