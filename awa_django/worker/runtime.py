"""Wires one worker process together and runs it until it is told to stop (or, in burst mode,
until there is nothing left to do).

Pieces: a dispatcher per queue, one completer, one promoter, one LISTEN notifier, a thread pool
for sync handlers and a pool of autocommit connections. Shutdown order: stop claiming, raise the
cancel flags of running attempts, wait for in-flight jobs up to the shutdown timeout, flush the
completer, close connections.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connections as db_connections
from psycopg_pool import AsyncConnectionPool

from awa_django.conf import AwaSettings
from awa_django.jobs import Job
from awa_django.storage.backlog import seconds_until_next_due
from awa_django.worker import connections
from awa_django.worker.completer import Completer
from awa_django.worker.dispatcher import Dispatcher
from awa_django.worker.executor import RetryPolicy
from awa_django.worker.notifier import Notifier
from awa_django.worker.promoter import Promoter

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerConfig:
    """Everything one worker process needs, resolved from settings and command options."""

    database_alias: str
    queues: Mapping[str, int]  # queue name -> concurrency
    claim_batch_size: int
    poll_interval_s: float
    promote_interval_s: float
    promote_batch_size: int
    completion_batch_size: int
    completion_flush_s: float
    retry_policy: RetryPolicy
    shutdown_timeout_s: float
    # Burst mode: exit once nothing is runnable, in flight, or due within burst_wait_s.
    burst: bool = False
    burst_wait_s: float = 0.0


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What a worker run did, for the command's final log line and for tests."""

    claimed: int
    written: int
    stale: int
    abandoned: int


def config_from_settings(
    conf: AwaSettings,
    *,
    queues: Mapping[str, int] | None = None,
    burst: bool = False,
    burst_wait_s: float = 0.0,
    shutdown_timeout_s: float | None = None,
) -> WorkerConfig:
    """A worker config from ``AWA`` settings; ``queues`` defaults to every declared queue."""
    return WorkerConfig(
        database_alias=conf.DATABASE_ALIAS,
        queues=dict(queues) if queues else {n: q.concurrency for n, q in conf.QUEUES.items()},
        claim_batch_size=conf.CLAIM_BATCH_SIZE,
        poll_interval_s=conf.POLL_INTERVAL_S,
        promote_interval_s=conf.PROMOTE_INTERVAL_S,
        promote_batch_size=conf.PROMOTE_BATCH_SIZE,
        completion_batch_size=conf.COMPLETION_BATCH_SIZE,
        completion_flush_s=conf.COMPLETION_FLUSH_S,
        retry_policy=RetryPolicy(
            base_s=conf.RETRY_BACKOFF_BASE_S,
            max_s=conf.RETRY_BACKOFF_MAX_S,
            jitter=conf.RETRY_JITTER,
        ),
        shutdown_timeout_s=(
            conf.SHUTDOWN_TIMEOUT_S if shutdown_timeout_s is None else shutdown_timeout_s
        ),
        burst=burst,
        burst_wait_s=burst_wait_s,
    )


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _utcnow() -> datetime:
    return datetime.now(UTC)


class WorkerRuntime:
    """One worker process's asyncio core."""

    def __init__(
        self, config: WorkerConfig, resolve: Callable[[str], Job[Any, Any] | None]
    ) -> None:
        self.config = config
        self._resolve = resolve
        self.identity = worker_identity()
        self.stopping = asyncio.Event()
        self.ready = asyncio.Event()
        self._dispatchers: dict[str, Dispatcher] = {}

    def request_stop(self) -> None:
        """Begin a graceful shutdown (safe to call more than once)."""
        if not self.stopping.is_set():
            self.stopping.set()
            for dispatcher in self._dispatchers.values():
                dispatcher.cancel_in_flight()

    def _on_notify(self, queue: str) -> None:
        dispatcher = self._dispatchers.get(queue)
        if dispatcher is not None:
            dispatcher.poke()

    async def run(self) -> RunSummary:
        config = self.config
        pool = await connections.open_pool(config.database_alias, max_size=3 + len(config.queues))
        threads = ThreadPoolExecutor(
            max_workers=sum(config.queues.values()), thread_name_prefix="awa-job"
        )
        completer = Completer(
            pool, batch_size=config.completion_batch_size, flush_s=config.completion_flush_s
        )
        promoter = Promoter(
            pool, interval_s=config.promote_interval_s, batch_size=config.promote_batch_size
        )
        notifier = Notifier(lambda: connections.connect(config.database_alias), self._on_notify)
        for queue, concurrency in config.queues.items():
            self._dispatchers[queue] = Dispatcher(
                queue=queue,
                concurrency=concurrency,
                claim_batch_size=config.claim_batch_size,
                poll_interval_s=config.poll_interval_s,
                claimed_by=self.identity,
                pool=pool,
                completer=completer,
                threads=threads,
                resolve=self._resolve,
                policy=config.retry_policy,
                now=_utcnow,
            )
        completer.start()
        background = [
            asyncio.create_task(notifier.run(self.stopping), name="awa-notifier"),
            asyncio.create_task(promoter.run(self.stopping), name="awa-promoter"),
        ]
        dispatch = [
            asyncio.create_task(d.run(self.stopping), name=f"awa-dispatch-{q}")
            for q, d in self._dispatchers.items()
        ]
        if config.burst:
            background.append(asyncio.create_task(self._watch_burst(pool, promoter, completer)))
        await asyncio.wait_for(notifier.listening.wait(), timeout=30)
        self.ready.set()
        logger.info(
            "worker ready identity=%s queues=%s burst=%s",
            self.identity,
            dict(config.queues),
            config.burst,
        )
        try:
            await self.stopping.wait()
        finally:
            abandoned = await self._drain(dispatch, completer)
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await completer.stop()
            await pool.close()
            threads.shutdown(wait=False, cancel_futures=True)
            # The connection async handlers used through sync_to_async lives on asgiref's thread.
            await sync_to_async(db_connections.close_all)()
        summary = RunSummary(
            claimed=sum(d.claimed_count for d in self._dispatchers.values()),
            written=completer.written_count,
            stale=completer.stale_count,
            abandoned=abandoned,
        )
        logger.info(
            "worker stopped claimed=%s completed_writes=%s stale=%s abandoned=%s",
            summary.claimed,
            summary.written,
            summary.stale,
            summary.abandoned,
        )
        return summary

    async def _drain(self, dispatch: list[asyncio.Task[None]], completer: Completer) -> int:
        """Stop claiming, then give in-flight jobs until the shutdown timeout to finish."""
        await asyncio.gather(*dispatch, return_exceptions=True)
        in_flight = [t for d in self._dispatchers.values() for t in d.in_flight]
        abandoned = 0
        if in_flight:
            logger.info("draining in-flight jobs count=%s", len(in_flight))
            _, pending = await asyncio.wait(in_flight, timeout=self.config.shutdown_timeout_s)
            abandoned = len(pending)
            if pending:
                # Their attempts stay open in storage and are rescued like a crashed worker's.
                logger.warning("shutdown timeout, abandoning in-flight jobs count=%s", abandoned)
                for task in pending:
                    task.cancel()
        await completer.drain()
        return abandoned

    async def _watch_burst(
        self, pool: AsyncConnectionPool[Any], promoter: Promoter, completer: Completer
    ) -> None:
        """Stop the worker once every queue is idle and nothing deferred is due soon."""
        queues = list(self.config.queues)
        while not self.stopping.is_set():
            await asyncio.sleep(0.05)
            if not all(d.idle for d in self._dispatchers.values()):
                continue
            await completer.drain()
            if await promoter.run_once():
                for dispatcher in self._dispatchers.values():
                    dispatcher.poke()
                continue
            async with pool.connection() as conn:
                due_in = await seconds_until_next_due(conn, queues=queues)
            if due_in is None or due_in > self.config.burst_wait_s:
                logger.info("burst finished: nothing runnable or due soon")
                self.request_stop()
                return
            await asyncio.sleep(max(due_in, 0.0) + 0.01)
