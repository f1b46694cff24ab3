"""The interface every compared queue implements."""

from __future__ import annotations

import asyncio
import signal
import threading
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from importlib import metadata
from typing import Any

import psycopg

# Business table of the Django-shaped workload, created in each system's database.
ORDERS_DDL = (
    "CREATE TABLE IF NOT EXISTS bench_orders "
    "(id bigserial PRIMARY KEY, customer text NOT NULL, total numeric(10, 2) NOT NULL)"
)
ORDERS_INSERT = "INSERT INTO bench_orders (customer, total) VALUES (%s, %s)"
QUEUE = "bench"
# The task drain's modes: the sync or the async no-op as a django.tasks @task
# (benchmarks/tasks.py), every task at Django's default priority or the tasks spread over
# every Django priority in turn (-100, -99, ..., 100, -100, ...).
TASK_MODES = ("task-sync", "task-async", "task-sync-spread", "task-async-spread")


def package_versions(packages: tuple[str, ...]) -> dict[str, str]:
    """The installed version of each distribution, for the results' record."""
    found = {}
    for package in packages:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


class System(ABC):
    """One queue: installing its schema, enqueueing (harness side) and serving (worker side)."""

    name: str
    # Distribution names whose versions the results record.
    packages: tuple[str, ...]
    # Handler modes the system is measured with.
    modes: tuple[str, ...] = ("async",)
    # Modes of the task drain (TASK_MODES, and native modes to compare them with); none: the
    # system has no django.tasks backend.
    task_modes: tuple[str, ...] = ()
    # Whether the system takes part in the task drain only.
    tasks_only: bool = False
    # Whether its worker runs one job at a time, so that concurrency C takes C processes.
    one_task_per_process: bool = False
    # SQL predicate over pg_stat_user_tables selecting this system's tables.
    tables_predicate: str

    def versions(self) -> dict[str, str]:
        return package_versions(self.packages)

    # -- harness side -------------------------------------------------------------------------

    @abstractmethod
    def install(self, url: str) -> None:
        """Create the system's schema in the empty database at ``url``."""

    @abstractmethod
    def open(self, url: str) -> None:
        """Open whatever client the enqueue methods use."""

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def enqueue_bulk(self, args_list: list[dict[str, Any]], mode: str = "async") -> None:
        """All of ``args_list`` through the system's fastest bulk path, for handlers of
        ``mode`` (only systems measured with sync handlers too distinguish them)."""

    @abstractmethod
    def enqueue_one(self, args: dict[str, Any]) -> None:
        """One job, committed before returning."""

    @abstractmethod
    def order_and_enqueue(self, args: dict[str, Any]) -> None:
        """The Django-shaped request: one business row and one job, atomically where the
        system's API allows it. Called from several threads at once."""

    def thread_done(self) -> None:
        """Release what a thread that called ``order_and_enqueue`` holds."""
        return None

    @abstractmethod
    def outstanding(self, conn: psycopg.Connection[Any]) -> int:
        """Jobs enqueued but not yet completed, from the system's own tables."""

    # -- worker side --------------------------------------------------------------------------

    def prepare_worker(self, url: str) -> None:
        """Start-up work of the worker process that precedes its clock (framework set-up)."""
        return None

    @abstractmethod
    def run_worker(self, url: str, concurrency: int, mode: str) -> None:
        """Run one worker in this process until SIGTERM, then shut it down cleanly.

        Handlers call ``PROBE.start(n)`` first and ``PROBE.finish(n)`` last."""


async def until_stopped(worker: asyncio.Task[Any], stop: asyncio.Event) -> None:
    """Wait for ``stop``; a worker task that ends first is a crash, and raises."""
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait([worker, stopped], return_when=asyncio.FIRST_COMPLETED)
    if worker.done():
        stopped.cancel()
        worker.result()
        raise RuntimeError("the worker returned before it was stopped")


def serve_until_sigterm(serve: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run ``serve(stop)`` on a new event loop; SIGTERM sets ``stop``."""

    async def main() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await serve(stop)

    asyncio.run(main())


class ThreadConnections:
    """One psycopg connection per request thread, as a web server's worker thread keeps one."""

    def __init__(self) -> None:
        self._local = threading.local()
        self.url = ""

    def get(self) -> psycopg.Connection[Any]:
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if conn is None:
            # Autocommit, with each request's atomic block an explicit ``conn.transaction()``:
            # what Django does, and what pgqueuer's psycopg driver insists on.
            conn = psycopg.connect(self.url, autocommit=True)
            self._local.conn = conn
        return conn

    def release(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def create_orders_table(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(ORDERS_DDL)
