"""The one session connection a worker process keeps: LISTEN, the wake locks and the
maintenance leader's lock share it.

All three need a session (a notification reaches a session; a session-scoped advisory lock goes
when its session ends), and none of them sends more than a statement now and then, so one
connection serves them all (docs/deployment.md, "Scaling"). Between statements the session
waits for notifications; a statement interrupts that wait (``use``), runs, and the wait resumes.
Notifications that arrive while a statement runs are kept by psycopg and handed out when the wait
resumes, so none is lost.

Losing the connection loses everything the session held. Its users learn it through the
``on_reset`` callbacks, run as soon as a connection is found lost (or closed after a failed
statement), and through ``generation``, which grows with every connection opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from psycopg import AsyncConnection

logger = logging.getLogger(__name__)

Connect = Callable[[], Awaitable[AsyncConnection[Any]]]


class SharedSession:
    """One session connection, lent to one user at a time (``use``); ``run`` listens on it
    between uses for ``channels`` and passes each notification to ``on_notify``."""

    def __init__(
        self,
        connect: Connect,
        *,
        listen: Sequence[str] = (),
        on_notify: Callable[[str, str], None] | None = None,
        on_listening: Callable[[], None] | None = None,
    ) -> None:
        self._connect = connect
        self._listen = tuple(listen)
        self._on_notify = on_notify
        # Called once each new connection listens: work committed while none did woke no one.
        self._on_listening = on_listening
        self._conn: AsyncConnection[Any] | None = None
        # One user of the connection at a time: a statement, or the listener's wait.
        self._lock = asyncio.Lock()
        self._wanted = 0  # users waiting for (or using) the connection
        self._free = asyncio.Event()  # no user wants it: the listener may wait on it
        self._free.set()
        self._waiting: asyncio.Task[None] | None = None
        self._on_reset: list[Callable[[], None]] = []
        # Grows with every connection opened: what a user holds on the session (locks) is valid
        # only for the generation it took it in.
        self.generation = 0
        # Set while a connection is open and LISTENs (without channels: while one is open).
        self.listening = asyncio.Event()

    def on_reset(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` whenever the connection is lost or closed (taking what the session
        held with it)."""
        self._on_reset.append(callback)

    @property
    def backend_pid(self) -> int | None:
        conn = self._conn
        return None if conn is None or conn.closed else conn.info.backend_pid

    @contextlib.asynccontextmanager
    async def use(self) -> AsyncIterator[AsyncConnection[Any]]:
        """The connection, for this caller alone until the block ends; opened when needed. An
        exception out of the block closes it: the caller cannot know what the session still
        holds, so nothing it held is believed held any more."""
        self._wanted += 1
        self._free.clear()
        try:
            if self._waiting is not None:
                # The listener's wait only reads from the socket: interrupting it loses nothing.
                self._waiting.cancel()
            async with self._lock:
                conn = await self._open()
                try:
                    yield conn
                except BaseException:
                    await self._drop()
                    raise
        finally:
            self._wanted -= 1
            if self._wanted == 0:
                self._free.set()

    async def _open(self) -> AsyncConnection[Any]:
        # Under self._lock.
        if self._conn is not None and not self._conn.closed:
            return self._conn
        conn = await self._connect()
        try:
            for channel in self._listen:
                # Channel names are this package's constants, never user input.
                await conn.execute(f"LISTEN {channel}")
        except BaseException:
            with contextlib.suppress(Exception):
                await conn.close()
            raise
        self._conn = conn
        self.generation += 1
        self.listening.set()
        if self._on_listening is not None:
            self._on_listening()
        return conn

    async def _drop(self) -> None:
        self.listening.clear()
        conn, self._conn = self._conn, None
        if conn is not None:
            for callback in self._on_reset:
                callback()
            with contextlib.suppress(Exception):
                await conn.close()

    async def run(self, stopping: asyncio.Event) -> None:
        """Keep the connection open and wait for notifications on it between uses, until
        ``stopping`` (or cancelled); reconnect with a backoff when it is lost."""
        delay = 0.5
        while not stopping.is_set():
            await self._free.wait()
            try:
                async with self._lock:
                    if self._wanted:
                        continue  # a user came first: let it have the connection
                    conn = await self._open()
                    if self._wanted:
                        continue  # one came while it opened
                    self._waiting = asyncio.create_task(self._receive(conn))
                    try:
                        await asyncio.wait({self._waiting})
                    finally:
                        self._waiting.cancel()
                        waiting, self._waiting = self._waiting, None
                    if not waiting.cancelled() and waiting.exception() is not None:
                        raise waiting.exception()  # type: ignore[misc]
                delay = 0.5
            except asyncio.CancelledError:
                raise
            except Exception:
                async with self._lock:
                    await self._drop()
                logger.exception("session connection lost, reconnecting in %.1fs", delay)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), timeout=delay)
                delay = min(delay * 2, 10.0)

    async def _receive(self, conn: AsyncConnection[Any]) -> None:
        # Also returns (raising) when the connection dies: the socket becomes readable.
        async for notify in conn.notifies():
            if self._on_notify is not None:
                self._on_notify(notify.channel, notify.payload)

    # The process root's service protocol (worker.service), by shape.
    name = "session"
    _listener: asyncio.Task[None] | None = None
    # Longest start() waits for the first LISTEN.
    LISTEN_TIMEOUT_S = 30.0

    async def start(self) -> None:
        """With channels, listen until ``stop`` and return once listening (a connection open
        and its LISTEN sent); without, the connection opens at its first use."""
        if self._listen:
            self._listener = asyncio.create_task(self.run(asyncio.Event()), name="awa-session")
            await asyncio.wait_for(self.listening.wait(), timeout=self.LISTEN_TIMEOUT_S)

    async def stop(self) -> None:
        # The listener only ends by cancellation.
        if self._listener is not None:
            self._listener.cancel()
            await asyncio.gather(self._listener, return_exceptions=True)
        await self.close()

    async def close(self) -> None:
        async with self._lock:
            await self._drop()
