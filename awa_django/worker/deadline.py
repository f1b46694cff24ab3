"""The hard deadline of an attempt, enforced by the worker that runs it.

When an attempt's queue has ``deadline_s`` above 0, the dispatcher gives it an
``AttemptDeadline``. When it passes, the attempt's cancel flag is raised and the handler is
stopped where it runs: an async handler is cancelled at the ``await`` it is in, a sync handler's
thread raises ``DeadlineExceeded`` at its next line of Python (``worker.interrupt``). The attempt
stays this worker's (heartbeats go on, its permit stays taken) until the handler has returned,
and is then closed with ``DeadlineExceeded`` as its error: the job cannot run anywhere else while
it still runs here. The leader never rescues an attempt for its deadline (docs/operations.md).

While the attempt waits on a registered callback the callback's own timeout governs it, so the
deadline is paused; when the callback resumes it, the attempt runs on with a fresh deadline of
the whole length, as its lease records.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from awa_django.declarations.jobs import CancelFlag
from awa_django.exceptions import DeadlineExceeded


class AttemptDeadline:
    """The deadline of one running attempt, on the worker's event loop."""

    __slots__ = ("_flag", "_loop", "_stop", "_timer", "expired", "length_s", "queue")

    def __init__(self, length_s: float, *, queue: str) -> None:
        self.length_s = length_s
        self.queue = queue
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._stop: Callable[[], None] | None = None
        self._flag: CancelFlag | None = None
        self.expired = False

    def start(self, flag: CancelFlag, stop: Callable[[], None]) -> None:
        """Arm the deadline: when it passes, ``flag`` is raised and ``stop`` stops the handler
        (both on the loop)."""
        self._flag = flag
        self._stop = stop
        self._arm()

    def pause(self) -> None:
        """A callback was registered: its timeout governs the attempt now."""
        self.cancel()

    def restart(self) -> None:
        """A callback resumed the attempt: it runs on with a fresh deadline."""
        if self._stop is not None and not self.expired:
            self._arm()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def error(self, stopped: BaseException) -> DeadlineExceeded:
        """What the attempt records: ``DeadlineExceeded``, with the traceback of the place where
        the handler was when it was stopped (``stopped`` is what stopping it raised)."""
        # An async handler's stop is a cancellation that asyncio.timeout turns into
        # TimeoutError; the cancellation's traceback runs into the handler.
        inner = stopped.__context__ if isinstance(stopped, TimeoutError) else None
        where = (inner or stopped).__traceback__
        return DeadlineExceeded(
            f"the attempt ran past its deadline of {self.length_s:g}s "
            f"(AWA['QUEUES'][{self.queue!r}]['deadline_s']) and was stopped"
        ).with_traceback(where)

    def _arm(self) -> None:
        self.cancel()
        self._timer = self._loop.call_later(self.length_s, self._expire)

    def _expire(self) -> None:
        self._timer = None
        self.expired = True
        assert self._flag is not None and self._stop is not None  # armed only by start()
        self._flag.set()
        self._stop()
