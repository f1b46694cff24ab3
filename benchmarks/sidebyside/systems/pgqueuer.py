"""pgqueuer (optional peer): a small asyncio queue on one table with LISTEN/NOTIFY.

It runs on asyncpg, the driver its documentation recommends for throughput. Bulk enqueue is
``Queries.enqueue`` with lists (one multi-row insert), single enqueue is ``Queries.enqueue``
with one job, the Django-shaped request uses ``SyncQueries`` on the request's psycopg
connection inside its transaction, and the worker is ``QueueManager.run`` with an async
entrypoint, batch size half the concurrency (the largest it accepts with
``max_concurrent_tasks``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg
import psycopg
from pgqueuer.db import AsyncpgDriver, SyncPsycopgDriver
from pgqueuer.models import Job
from pgqueuer.qm import QueueManager
from pgqueuer.queries import Queries, SyncQueries

from benchmarks.sidebyside.probe import PROBE
from benchmarks.sidebyside.systems.base import (
    ORDERS_INSERT,
    System,
    ThreadConnections,
    create_orders_table,
    serve_until_sigterm,
    until_stopped,
)

ENTRYPOINT = "bench_noop"
# Finished jobs leave the queue table (moved to pgqueuer_log), so what is left is outstanding.
OUTSTANDING = "SELECT count(*) FROM pgqueuer"


def _payload(args: dict[str, Any]) -> bytes:
    return json.dumps(args, separators=(",", ":")).encode()


class PgQueuer(System):
    name = "pgqueuer"
    packages = ("pgqueuer", "asyncpg")
    tables_predicate = "relname LIKE 'pgqueuer%'"

    def __init__(self) -> None:
        self._runner: asyncio.Runner | None = None
        self._conn: asyncpg.Connection | None = None
        self._queries: Queries | None = None
        self._requests = ThreadConnections()

    def install(self, url: str) -> None:
        async def install() -> None:
            conn = await asyncpg.connect(url)
            await Queries(AsyncpgDriver(conn)).install()
            await conn.close()

        asyncio.run(install())
        create_orders_table(url)

    def open(self, url: str) -> None:
        self._requests.url = url
        # One loop kept open for the harness's calls, like an async application's.
        self._runner = asyncio.Runner()
        self._conn = self._runner.run(asyncpg.connect(url))
        self._queries = Queries(AsyncpgDriver(self._conn))

    def _run(self, coro: Any) -> Any:
        assert self._runner is not None, "open() first"
        return self._runner.run(coro)

    def close(self) -> None:
        if self._runner is not None:
            if self._conn is not None:
                self._run(self._conn.close())
            self._runner.close()
            self._runner = None

    def enqueue_bulk(self, args_list: list[dict[str, Any]], mode: str = "async") -> None:
        assert self._queries is not None
        n = len(args_list)
        self._run(
            self._queries.enqueue([ENTRYPOINT] * n, [_payload(a) for a in args_list], [0] * n)
        )

    def enqueue_one(self, args: dict[str, Any]) -> None:
        assert self._queries is not None
        self._run(self._queries.enqueue(ENTRYPOINT, _payload(args)))

    def order_and_enqueue(self, args: dict[str, Any]) -> None:
        conn = self._requests.get()
        with conn.transaction():
            conn.execute(ORDERS_INSERT, ["customer", 12.5])
            SyncQueries(SyncPsycopgDriver(conn)).enqueue(ENTRYPOINT, _payload(args))

    def thread_done(self) -> None:
        self._requests.release()

    def outstanding(self, conn: psycopg.Connection[Any]) -> int:
        row = conn.execute(OUTSTANDING).fetchone()
        return int(row[0]) if row else 0

    def run_worker(self, url: str, concurrency: int, mode: str) -> None:
        async def serve(stop: asyncio.Event) -> None:
            conn = await asyncpg.connect(url)
            qm = QueueManager(Queries(AsyncpgDriver(conn)))
            # max_concurrent_tasks must be at least twice the batch size; concurrency 1 is
            # expressed as a per-entrypoint limit instead.
            limit = 1 if concurrency == 1 else 0

            @qm.entrypoint(ENTRYPOINT, concurrency_limit=limit)
            async def noop(job: Job) -> None:
                n = json.loads(job.payload or b"{}")["n"]
                PROBE.start(n)
                PROBE.finish(n)

            if concurrency == 1:
                run = qm.run(batch_size=1)
            else:
                run = qm.run(batch_size=concurrency // 2, max_concurrent_tasks=concurrency)
            task = asyncio.create_task(run)
            await until_stopped(task, stop)
            qm.shutdown.set()
            await task
            await conn.close()

        serve_until_sigterm(serve)


SYSTEM = PgQueuer()
