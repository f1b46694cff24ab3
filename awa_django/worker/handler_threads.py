"""The threads sync handlers run on, and the way their results get back to the event loop.

How it works: ``run`` puts the call on a queue that a fixed number of threads (started as they
are needed, like ``ThreadPoolExecutor``'s) take calls from, and awaits a plain asyncio future.
A thread that finishes a call appends the outcome to a shared deque and wakes the loop only if
no wakeup is already pending; that one wakeup settles every outcome queued by then. The threads
are daemons: a worker leaves a call that outlived its shutdown timeout to rescue
(docs/operations.md), and no error path can leave the process waiting at exit for a thread
that waits for work.

Why not ``loop.run_in_executor``: for every call it builds a ``concurrent.futures.Future``
(with its own condition variable and lock), chains it to an asyncio future through two
callbacks, and wakes the loop once per result. With many short sync jobs that was a third of
the event loop's time in a no-op drain.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# (future, call, arguments), or None: the thread that takes it ends.
_Work = tuple[asyncio.Future[Any], Callable[..., Any], tuple[Any, ...]] | None


class HandlerThreads:
    """At most ``size`` threads running sync calls for one event loop."""

    name = "handler-threads"

    def __init__(self, size: int, *, name_prefix: str = "awa-job") -> None:
        self._size = size
        self._name_prefix = name_prefix
        self._work: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._outcomes: collections.deque[tuple[asyncio.Future[Any], bool, Any]] = (
            collections.deque()
        )
        self._threads: list[threading.Thread] = []
        self._idle = 0  # threads waiting for work (changed under _lock)
        self._lock = threading.Lock()
        self._wakeup_pending = False
        self._closed = False

    async def start(self) -> None:
        """Nothing to open: threads start as calls arrive."""

    async def stop(self) -> None:
        self.shutdown()

    async def run(self, func: Callable[..., T], *args: Any) -> T:
        """``func(*args)`` on one of the threads; its result, or its exception raised here.
        Cancelling the caller does not stop a call already running."""
        if self._closed:
            raise RuntimeError("handler threads are shut down")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._work.put((future, func, args))
        self._start_thread_if_needed()
        return await future

    def grow_to(self, size: int) -> None:
        """Allow up to ``size`` threads (a queue's concurrency raised live); never fewer than
        now: threads beyond the need just wait for work."""
        with self._lock:
            self._size = max(self._size, size)

    def shutdown(self) -> None:
        """Stop taking calls (from the loop's thread): calls not started are cancelled, and
        threads end after their current one."""
        self._closed = True
        while True:
            try:
                item = self._work.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        for _ in self._threads:
            self._work.put(None)

    def _start_thread_if_needed(self) -> None:
        with self._lock:
            if self._idle > 0:
                # A waiting thread takes the call; the count is its claim on it.
                self._idle -= 1
                return
            if len(self._threads) >= self._size:
                return
            thread = threading.Thread(
                target=self._serve, name=f"{self._name_prefix}_{len(self._threads)}", daemon=True
            )
            self._threads.append(thread)
        thread.start()

    def _serve(self) -> None:
        while True:
            item = self._work.get()
            if item is None:
                return
            future, func, args = item
            try:
                outcome: tuple[asyncio.Future[Any], bool, Any] = (future, True, func(*args))
            except BaseException as exc:  # handed to the awaiting task, as an executor would
                outcome = (future, False, exc)
            del item, func, args
            self._outcomes.append(outcome)
            del outcome
            # Read after the append: either this wakeup or the one pending settles it (the
            # loop clears the flag before it takes the outcomes).
            if not self._wakeup_pending:
                self._wakeup_pending = True
                self._wake(future.get_loop())
            with self._lock:
                self._idle += 1

    def _wake(self, loop: asyncio.AbstractEventLoop) -> None:
        # RuntimeError: the loop is closed, the worker has stopped and nobody awaits the result.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        self._wakeup_pending = False
        outcomes = self._outcomes
        while outcomes:
            future, ok, value = outcomes.popleft()
            if future.cancelled():
                continue
            if ok:
                future.set_result(value)
            elif isinstance(value, StopIteration | GeneratorExit):
                # A future refuses StopIteration (it would end the awaiting coroutine quietly),
                # and GeneratorExit would read as that coroutine being closed.
                future.set_exception(RuntimeError(f"sync handler raised {value!r}"))
            else:
                future.set_exception(value)
