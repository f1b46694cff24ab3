"""Leader election for cluster-wide maintenance.

How it works: every worker (and every ``awa_maintenance`` process) tries
``pg_try_advisory_lock`` on a fixed key, on its session connection (``storage.session``, shared
with LISTEN and the wake locks). The lock is session-scoped, so exactly one session in the
cluster holds it, and PostgreSQL releases it the moment that session ends: a leader whose
process dies, or whose connection drops, loses leadership without any cooperation, and another
process wins the next attempt. In a worker process the tries go with the process's other
periodic session tries, in one statement, on an interval that grows with the fleet so that the
fleet tries about once per ``FLEET_TRY_S`` whatever its size (``core.session_tries``, which
also states the failover bound); an elector without them tries every
``NON_LEADER_TRY_INTERVALS`` retry intervals.

While leading, the elector pings the session every ``retry_interval_s``. A failed ping means
the session, and with it the lock, may be gone: the elector steps down at once and clears
``is_leader`` before anything else runs. A deposed leader must never run another maintenance
pass on the strength of an old win; services check ``is_leader`` before each pass, and every
maintenance statement is itself safe to run twice (guards in SQL), so the worst case of a stale
check is a duplicate no-op, never a wrong write.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Final

from psycopg_pool import AsyncConnectionPool

from awa_django.core.session_tries import SessionTries
from awa_django.storage import control
from awa_django.storage.session import SharedSession
from awa_django.storage.statement import run_async, run_atomic_async

logger = logging.getLogger(__name__)

# 'AWA_MAIN' as a 64-bit advisory lock key.
LEADER_LOCK_KEY: Final = 0x4157415F4D41494E
# A process that is not the leader tries the lock every this many retry intervals: the tries of
# an idle fleet were a third of the statements it sent (100 processes: 50 a second, #37), while
# failover with many processes takes a fraction of one interval whatever the factor.
NON_LEADER_TRY_INTERVALS: Final = 2


async def _until_next_try(
    stopping: asyncio.Event, is_leader: bool, retry_interval_s: float
) -> None:
    """Wait for an elector's next renewal (leader) or try (not), or until it is stopping."""
    interval = retry_interval_s if is_leader else retry_interval_s * NON_LEADER_TRY_INTERVALS
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stopping.wait(), timeout=interval)


class LeaderElector:
    """Holds (or keeps trying for) the maintenance leader lock, on the process's session."""

    def __init__(
        self,
        session: SharedSession,
        *,
        retry_interval_s: float,
        tries: SessionTries | None = None,
    ) -> None:
        self._session = session
        # The process's session tries, when it has them: a non-leader's try of the lock then
        # goes with its other periodic tries, in one statement on their schedule (#37).
        self._tries = tries
        self._retry_interval_s = retry_interval_s
        # The session generation the lock was won in: a newer connection does not hold it.
        self._won_in = 0
        self.is_leader = False
        # Set whenever is_leader changes, so the runtime snapshot can say so at once instead of
        # at its next interval (awa_health reads leadership from it).
        self.changed = asyncio.Event()
        session.on_reset(self._on_reset)

    async def run(self, stopping: asyncio.Event) -> None:
        try:
            while not stopping.is_set():
                if self._tries is not None and not self.is_leader:
                    await self._try_with(self._tries, stopping)
                    continue
                await self._tick()
                await _until_next_try(stopping, self.is_leader, self._retry_interval_s)
        finally:
            await self._release()

    async def _try_with(self, tries: SessionTries, stopping: asyncio.Event) -> None:
        try:
            won, generation = await tries.try_leader(LEADER_LOCK_KEY, stopping)
        except Exception:
            # Logged by the tries; the session closed its connection, the next tick reopens it.
            return
        if won:
            self._won_in = generation
            self.is_leader = True
            self.changed.set()
            logger.info("became maintenance leader")
            if self._session.generation != generation:
                self._on_reset()
            # Renew at the leader's interval from now on.
            await _until_next_try(stopping, True, self._retry_interval_s)

    def _on_reset(self) -> None:
        if self.is_leader:
            logger.warning("lost maintenance leadership: leader connection failed")
            self._step_down()

    async def _tick(self) -> None:
        try:
            if self.is_leader:
                # Bounded, waiting for the shared session included: on a dead network a
                # statement on it would otherwise hang until TCP gives up (hours), and a leader
                # that cannot reach its session must step down.
                await asyncio.wait_for(self._renew(), timeout=max(5.0, 3 * self._retry_interval_s))
                return
            async with self._session.use() as conn:
                if await run_async(conn, control.try_leader_lock(key=LEADER_LOCK_KEY)):
                    self._won_in = self._session.generation
                    self.is_leader = True
                    self.changed.set()
                    logger.info("became maintenance leader")
        except Exception:
            if self.is_leader:
                logger.warning("lost maintenance leadership: leader connection failed")
            else:
                logger.exception("leader election attempt failed")
            # The session closed its connection (or cannot be reached): the lock is gone, or
            # is as good as gone.
            self._step_down()

    async def _renew(self) -> None:
        async with self._session.use() as conn:
            if self._session.generation != self._won_in:
                self._on_reset()
                return
            await run_async(conn, control.PING)

    def _step_down(self) -> None:
        if self.is_leader:
            self.is_leader = False
            self.changed.set()

    async def _release(self) -> None:
        """Give up leadership on shutdown so another process can take over at once."""
        was_leader = self.is_leader
        self._step_down()
        if not was_leader:
            return
        with contextlib.suppress(Exception):
            async with self._session.use() as conn:
                if self._session.generation == self._won_in:
                    await run_async(conn, control.release_leader_lock(key=LEADER_LOCK_KEY))
        logger.info("released maintenance leadership")


# A lease not renewed for this many election intervals is free for another process to take.
LEASE_INTERVALS: Final = 3


class LeaseElector:
    """Leadership without a session (``AWA["WORKER_SESSION"] = False``): a lease on this
    process's runtime_instances row, taken and renewed every ``retry_interval_s`` in one short
    transaction on the pool, so it works through a transaction pooler.

    A lease not renewed for ``LEASE_INTERVALS`` intervals expires, and another process takes it
    at its next attempt: a SIGKILLed leader is replaced within about four intervals instead of
    one. The leader steps down by itself once it has not renewed for all but one of those
    intervals, before anyone else can take over; a pass that still overlaps is harmless, since
    every maintenance statement is safe to run twice (see above)."""

    def __init__(
        self, pool: AsyncConnectionPool[Any], *, instance_id: str, retry_interval_s: float
    ) -> None:
        self._pool = pool
        self._instance_id = instance_id
        self._retry_interval_s = retry_interval_s
        self._ttl_s = LEASE_INTERVALS * retry_interval_s
        self._renewed_at = 0.0  # monotonic time of the last successful take or renewal
        self.is_leader = False
        self.changed = asyncio.Event()

    async def run(self, stopping: asyncio.Event) -> None:
        try:
            while not stopping.is_set():
                await self._tick()
                await _until_next_try(stopping, self.is_leader, self._retry_interval_s)
        finally:
            await self._release()

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with self._pool.connection() as conn:
                held = await asyncio.wait_for(
                    run_atomic_async(
                        conn,
                        control.take_leader_lease(
                            key=LEADER_LOCK_KEY, instance_id=self._instance_id, ttl_s=self._ttl_s
                        ),
                    ),
                    timeout=self._ttl_s,
                )
        except Exception:
            logger.exception("leader lease attempt failed")
            held = None
        if held:
            self._renewed_at = started
            if not self.is_leader:
                self.is_leader = True
                self.changed.set()
                logger.info("became maintenance leader")
        elif self.is_leader and (
            held is False or loop.time() - self._renewed_at >= self._ttl_s - self._retry_interval_s
        ):
            logger.warning("lost maintenance leadership: the lease was not renewed")
            self.is_leader = False
            self.changed.set()

    async def _release(self) -> None:
        if not self.is_leader:
            return
        self.is_leader = False
        self.changed.set()
        with contextlib.suppress(Exception):
            async with self._pool.connection() as conn:
                await run_async(conn, control.release_leader_lease(instance_id=self._instance_id))
        logger.info("released maintenance leadership")
