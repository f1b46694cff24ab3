"""The one shape every background part of a process has, and the one way they start and stop.

A service has a ``name`` and two coroutines: ``start()`` (open what it needs, start its task)
and ``stop()`` (finish what it holds, end its task, close what it opened). The process root
(``worker.process``) builds every service first, each given the ones it depends on, then
starts them in order; it stops the started ones in reverse, so a service stops before the
services it depends on, whether the process ends normally or a later service failed to start.

Classes below the worker layer (the session, the maintainer) have the same two methods and
satisfy the protocol by shape, without importing it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterable
from typing import Any, Protocol

logger = logging.getLogger(__name__)


class Service(Protocol):
    @property
    def name(self) -> str: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class Loop:
    """A service whose work is one coroutine, ``run(stopped)``, that returns once ``stopped``
    is set: ``start`` runs it as a task, ``stop`` sets the event and waits for the task."""

    name = "loop"

    _stopped: asyncio.Event | None = None
    _task: asyncio.Task[None] | None = None

    def run(self, stopped: asyncio.Event) -> Coroutine[Any, Any, None]:
        raise NotImplementedError

    async def start(self) -> None:
        self._stopped = asyncio.Event()
        self._task = asyncio.create_task(self.run(self._stopped), name=f"awa-{self.name}")

    async def stop(self) -> None:
        if self._stopped is not None and self._task is not None:
            self._stopped.set()
            await asyncio.gather(self._task, return_exceptions=True)


class Shutdown:
    """A process's one request to stop, and the deadline its drain shares: the dispatchers
    wait for in-flight jobs and the completer writes their results until the same moment."""

    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self.requested = asyncio.Event()
        self.deadline: float | None = None  # event-loop time, once requested

    def request(self) -> bool:
        """Ask for the stop; False when it had been asked for already."""
        if self.requested.is_set():
            return False
        self.deadline = asyncio.get_running_loop().time() + self._timeout_s
        self.requested.set()
        return True


class Services:
    """Starts services in order and stops the started ones in reverse."""

    def __init__(self) -> None:
        self._started: list[Service] = []

    async def start(self, services: Iterable[Service]) -> None:
        """Start each in turn. One that fails to start raises here; the ones before it stay
        started until ``stop``."""
        for service in services:
            await service.start()
            self._started.append(service)
            logger.debug("service started name=%s", service.name)

    async def stop(self) -> None:
        """Stop every started service, the last started first. One that fails to stop is
        logged; the ones it depends on are stopped all the same."""
        while self._started:
            service = self._started.pop()
            try:
                await service.stop()
            except Exception:
                logger.exception("service failed to stop name=%s", service.name)
            else:
                logger.debug("service stopped name=%s", service.name)
