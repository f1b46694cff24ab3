"""Stopping a sync handler in the thread that runs it, when its attempt's deadline passes.

Python cannot kill a thread. It can raise an exception in one: ``PyThreadState_SetAsyncExc``
makes the target thread raise it at the next line of Python it runs (a blocking call into C, such
as ``time.sleep`` or a socket read without a timeout, returns first). ``InterruptibleCall`` runs
one call so that ``interrupt()`` raises ``DeadlineExceeded`` in it only while that call runs,
never in the worker's own code around it, where it could lose a result or end a pool thread.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from awa_django.exceptions import DeadlineExceeded

T = TypeVar("T")


def _raise_in(thread: int, exc: type[BaseException] | None) -> None:
    # None clears an exception set earlier that the thread has not raised yet.
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread), None if exc is None else ctypes.py_object(exc)
    )


class InterruptibleCall:
    """One call that another thread may interrupt, once, with ``DeadlineExceeded``."""

    __slots__ = ("_lock", "_thread", "interrupted")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: int | None = None  # the running thread's ident, while the call runs
        self.interrupted = False

    def run(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``func(*args, **kwargs)`` in this thread; raises ``DeadlineExceeded`` where it is
        interrupted, or at once when it was interrupted before it started."""
        try:
            with self._lock:
                if self.interrupted:
                    raise DeadlineExceeded
                self._thread = threading.get_ident()
            return func(*args, **kwargs)
        finally:
            self._leave()

    def interrupt(self) -> None:
        """Raise ``DeadlineExceeded`` in the call if it is running (from any other thread)."""
        with self._lock:
            if self.interrupted:
                return
            self.interrupted = True
            if self._thread is not None:
                _raise_in(self._thread, DeadlineExceeded)

    def _leave(self) -> None:
        # An interrupt set just before the call returned may be raised anywhere in here, until
        # it is cleared under the lock: start again until this has run to its end.
        while True:
            try:
                with self._lock:
                    thread, self._thread = self._thread, None
                    if thread is not None and self.interrupted:
                        _raise_in(thread, None)
                return
            except DeadlineExceeded:
                continue
