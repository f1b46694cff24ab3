"""procrastinate (latest): the most used PostgreSQL queue with a Django integration.

Bulk enqueue is ``Task.batch_defer`` (one multi-row insert), single enqueue is ``Task.defer``,
the Django-shaped request passes the request's psycopg connection to
``Task.configure(connection=...)`` so the job joins the business row's transaction, and the
worker is ``App.run_worker_async`` with an async task. Everything else is procrastinate's
defaults (finished jobs are kept, with status ``succeeded``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import procrastinate
import psycopg

from benchmarks.sidebyside.probe import PROBE
from benchmarks.sidebyside.systems.base import (
    ORDERS_INSERT,
    QUEUE,
    System,
    ThreadConnections,
    create_orders_table,
    serve_until_sigterm,
    until_stopped,
)

TASK = "bench_noop"
OUTSTANDING = "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"


def _app(connector: procrastinate.BaseConnector) -> tuple[procrastinate.App, Any]:
    app = procrastinate.App(connector=connector)

    @app.task(name=TASK, queue=QUEUE)
    async def noop(n: int, payload: str) -> None:
        PROBE.start(n)
        PROBE.finish(n)

    return app, noop


class Procrastinate(System):
    name = "procrastinate"
    packages = ("procrastinate", "psycopg")
    tables_predicate = "relname LIKE 'procrastinate%'"

    def __init__(self) -> None:
        self._app: procrastinate.App | None = None
        self._task: Any = None
        self._requests = ThreadConnections()

    def install(self, url: str) -> None:
        app, _ = _app(procrastinate.SyncPsycopgConnector(conninfo=url))
        with app.open():
            app.schema_manager.apply_schema()
        create_orders_table(url)

    def open(self, url: str) -> None:
        # The documented connector for synchronous code that defers jobs.
        self._requests.url = url
        self._app, self._task = _app(procrastinate.SyncPsycopgConnector(conninfo=url))
        self._app.open()

    def close(self) -> None:
        if self._app is not None:
            self._app.close()
            self._app = None

    def enqueue_bulk(self, args_list: list[dict[str, Any]], mode: str = "async") -> None:
        self._task.batch_defer(*args_list)

    def enqueue_one(self, args: dict[str, Any]) -> None:
        self._task.defer(**args)

    def order_and_enqueue(self, args: dict[str, Any]) -> None:
        conn = self._requests.get()
        with conn.transaction():
            conn.execute(ORDERS_INSERT, ["customer", 12.5])
            self._task.configure(connection=conn).defer(**args)

    def thread_done(self) -> None:
        self._requests.release()

    def outstanding(self, conn: psycopg.Connection[Any]) -> int:
        row = conn.execute(OUTSTANDING).fetchone()
        return int(row[0]) if row else 0

    def run_worker(self, url: str, concurrency: int, mode: str) -> None:
        async def serve(stop: asyncio.Event) -> None:
            app, _ = _app(procrastinate.PsycopgConnector(conninfo=url))
            async with app.open_async():
                worker = asyncio.create_task(
                    app.run_worker_async(
                        queues=[QUEUE], concurrency=concurrency, install_signal_handlers=False
                    )
                )
                await until_stopped(worker, stop)
                # Cancelling the worker task is procrastinate's graceful stop: running jobs
                # finish, then it returns.
                worker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await worker

        serve_until_sigterm(serve)


SYSTEM = Procrastinate()
