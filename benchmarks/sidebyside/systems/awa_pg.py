"""awa-pg: Awa's own Python SDK (Rust core), the reference implementation of the design.

Bulk enqueue is ``enqueue_many_copy`` (COPY into the queue-storage ring), single enqueue is
``Client.insert``, the Django-shaped request uses ``Client.transaction()`` so the business row
and the job commit together, and the worker is ``AsyncClient.start`` with an async handler.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import awa
import psycopg

from benchmarks.sidebyside.probe import PROBE
from benchmarks.sidebyside.systems.base import (
    QUEUE,
    System,
    create_orders_table,
    serve_until_sigterm,
)

KIND = "bench_noop"
# The jobs view spans every storage backend; slow (about a second) but only read after a run.
OUTSTANDING = (
    "SELECT count(*) FROM awa.jobs WHERE state NOT IN ('completed', 'failed', 'cancelled')"
)
ORDERS_INSERT = "INSERT INTO bench_orders (customer, total) VALUES ($1, $2::numeric)"


@dataclass
class NoopArgs:
    n: int
    payload: str


class AwaPg(System):
    name = "awa_pg"
    packages = ("awa-pg",)
    tables_predicate = "schemaname = 'awa'"

    def __init__(self) -> None:
        self._client: awa.Client | None = None

    def install(self, url: str) -> None:
        async def install() -> None:
            client = awa.AsyncClient(url)
            await client.migrate()
            # A fresh database has the canonical (row-per-job) storage active; the queue-storage
            # ring is the engine awa-pg documents for throughput and the one COPY enqueue uses.
            await client.install_queue_storage()
            await client.close()

        asyncio.run(install())
        create_orders_table(url)

    def open(self, url: str) -> None:
        self._client = awa.Client(url, max_connections=8)

    @property
    def client(self) -> awa.Client:
        assert self._client is not None, "open() first"
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def enqueue_bulk(self, args_list: list[dict[str, Any]], mode: str = "async") -> None:
        self.client.enqueue_many_copy(args_list, kind=KIND, queue=QUEUE)

    def enqueue_one(self, args: dict[str, Any]) -> None:
        self.client.insert(args, kind=KIND, queue=QUEUE)

    def order_and_enqueue(self, args: dict[str, Any]) -> None:
        with self.client.transaction() as tx:
            tx.execute(ORDERS_INSERT, "customer", "12.5")
            tx.insert(args, kind=KIND, queue=QUEUE)

    def outstanding(self, conn: psycopg.Connection[Any]) -> int:
        row = conn.execute(OUTSTANDING).fetchone()
        return int(row[0]) if row else 0

    def run_worker(self, url: str, concurrency: int, mode: str) -> None:
        async def serve(stop: asyncio.Event) -> None:
            client = awa.AsyncClient(url, max_connections=max(10, concurrency // 4 + 4))

            @client.task(NoopArgs, kind=KIND, queue=QUEUE)
            async def noop(job: awa.Job[NoopArgs]) -> None:
                n = job.args.n
                PROBE.start(n)
                PROBE.finish(n)

            await client.start([(QUEUE, concurrency)])
            await stop.wait()
            await client.shutdown(timeout_ms=10_000)
            await client.close()

        serve_until_sigterm(serve)


SYSTEM = AwaPg()
