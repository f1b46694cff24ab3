"""Wires one worker process together and runs it until it is told to stop (or, in burst mode,
until there is nothing left to do).

Pieces: a dispatcher per queue, one completer, one heartbeat, a thread pool for sync handlers,
two server connections (a one-connection autocommit pool for claims, completions and
maintenance passes; one session for LISTEN, the wake locks and the leader lock) and, unless
disabled, a
``Maintainer`` (the leader elector and the maintenance services it runs while leading).
``awa_maintenance`` runs a ``Maintainer`` without this worker process
(``awa_django.management.maintenance_process``).

Shutdown order: stop claiming, raise the cancel flags of running attempts, wait for in-flight
jobs up to the shutdown timeout while heartbeats continue, flush the completer, then stop the
heartbeat, release leadership and close connections. Attempts still running at the deadline
are left open in storage and rescued like a crashed worker's: never lost.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connections as db_connections
from psycopg_pool import AsyncConnectionPool

from awa_django.callbacks.waiting import CallbackHub
from awa_django.conf import AwaSettings
from awa_django.core.outcome import OutcomeCounts
from awa_django.core.retry import RetryPolicy
from awa_django.declarations.jobs import Job, registry
from awa_django.maintenance.maintainer import Maintainer, MaintenanceConfig
from awa_django.maintenance.promoter import Promoter, PromoterConfig
from awa_django.ops.cron_publish import declared_schedule_rows, publish_schedules
from awa_django.ops.descriptors import Declarations, declared
from awa_django.storage import connections
from awa_django.storage.backlog import seconds_until_next_due
from awa_django.storage.session import SharedSession
from awa_django.worker.completer import Completer
from awa_django.worker.control import ConcurrencyControl
from awa_django.worker.dispatcher import Dispatcher, ExecutingAttempt
from awa_django.worker.handler_threads import HandlerThreads
from awa_django.worker.heartbeat import Heartbeat
from awa_django.worker.job_log import JobLog, JobLogConfig
from awa_django.worker.notifier import LISTEN_CHANNELS, Notifier
from awa_django.worker.rate_limit import RateLimit
from awa_django.worker.reporter import DECLARATIONS_EVERY, InstanceReporter
from awa_django.worker.wake import WakeLocks
from awa_django.worker.weighted import QueueShare, WeightedPermits

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerConfig:
    """Everything one worker process needs, resolved from settings and command options."""

    # A Django alias or a libpq DSN (AWA["WORKER_DATABASE"]): the worker's own connections.
    database_alias: str
    queues: Mapping[str, int]  # queue name -> concurrency
    deadlines: Mapping[str, float]  # queue name -> attempt deadline in seconds (0: none)
    claim_batch_size: int
    poll_interval_s: float
    promoter: PromoterConfig
    completion_batch_size: int
    completion_flush_s: float
    retry_policy: RetryPolicy
    shutdown_timeout_s: float
    heartbeat_interval_s: float
    # None: this process never competes for leadership (--no-maintenance).
    maintenance: MaintenanceConfig | None
    # Burst mode: exit once nothing is runnable, in flight, or due within burst_wait_s.
    burst: bool = False
    burst_wait_s: float = 0.0
    # Priority aging interval per queue in seconds (0 or missing: no aging).
    aging_s: Mapping[str, float] = field(default_factory=dict)
    # Queues whose lanes run one job at a time (sequential_lanes).
    sequential: frozenset[str] = frozenset()
    # Rate-limited queues only.
    rate_limits: Mapping[str, RateLimit] = field(default_factory=dict)
    # Weighted mode: the process-wide limit and each queue's share (None: hard-reserved).
    worker_concurrency: int | None = None
    shares: Mapping[str, QueueShare] = field(default_factory=dict)
    # What this process declares (DLQ policies, descriptors), published with its snapshot.
    declared: Declarations = field(default_factory=Declarations)
    runtime_snapshot_interval_s: float = 10.0
    # False (AWA["WORKER_SESSION"]): poll-only, no session connection (no LISTEN, no wake
    # locks, a leader lease instead of the session lock), for a transaction pooler.
    session: bool = True
    # Connections of the pool for claims, completions and maintenance (AWA["WORKER_POOL_SIZE"]).
    pool_size: int = 2
    job_log: JobLogConfig = field(default_factory=JobLogConfig)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """What a worker run did, for the command's final log line and for tests."""

    claimed: int
    # The attempts whose results were written, by outcome.
    closed: OutcomeCounts = field(default_factory=OutcomeCounts)
    # Results not written: the attempt had been closed elsewhere (cancel, rescue, callback).
    stale: int
    # Attempts left running at the shutdown timeout, for rescue.
    abandoned: int

    @property
    def written(self) -> int:
        return self.closed.total

    def log(self, to: logging.Logger) -> None:
        """The last line of a worker or ``awa_maintenance`` process, on its own logger."""
        to.info(
            "worker stopped claimed=%s %s stale=%s abandoned=%s",
            self.claimed,
            self.closed,
            self.stale,
            self.abandoned,
            extra={
                "claimed": self.claimed,
                **self.closed.fields(),
                "stale": self.stale,
                "abandoned": self.abandoned,
            },
        )


def log_ready(
    to: logging.Logger, identity: str, queues: Mapping[str, int], *, maintenance: bool, burst: bool
) -> None:
    """The first line of a worker or ``awa_maintenance`` process, on its own logger."""
    to.info(
        "worker ready identity=%s queues=%s maintenance=%s burst=%s",
        identity,
        dict(queues),
        maintenance,
        burst,
    )


def config_from_settings(
    conf: AwaSettings,
    *,
    queues: Mapping[str, int] | None = None,
    burst: bool = False,
    burst_wait_s: float = 0.0,
    shutdown_timeout_s: float | None = None,
    maintenance: bool = True,
) -> WorkerConfig:
    """A worker config from ``AWA`` settings; ``queues`` defaults to every declared queue
    (pass an empty mapping for a maintenance-only process)."""
    chosen = (
        dict(queues) if queues is not None else {n: q.concurrency for n, q in conf.QUEUES.items()}
    )
    return WorkerConfig(
        database_alias=conf.WORKER_DATABASE or conf.DATABASE_ALIAS,
        queues=chosen,
        deadlines={name: conf.QUEUES[name].deadline_s for name in chosen},
        claim_batch_size=conf.CLAIM_BATCH_SIZE,
        poll_interval_s=conf.POLL_INTERVAL_S,
        promoter=PromoterConfig.from_settings(conf),
        completion_batch_size=conf.COMPLETION_BATCH_SIZE,
        completion_flush_s=conf.COMPLETION_FLUSH_S,
        retry_policy=RetryPolicy.from_settings(conf),
        shutdown_timeout_s=(
            conf.SHUTDOWN_TIMEOUT_S if shutdown_timeout_s is None else shutdown_timeout_s
        ),
        heartbeat_interval_s=conf.HEARTBEAT_INTERVAL_S,
        maintenance=MaintenanceConfig.from_settings(conf) if maintenance else None,
        burst=burst,
        burst_wait_s=burst_wait_s,
        aging_s={name: conf.QUEUES[name].aging_interval_s for name in chosen},
        rate_limits={
            name: RateLimit(
                rate=limit[0], burst=limit[1], fleet=conf.QUEUES[name].rate_limit_scope == "fleet"
            )
            for name in chosen
            if (limit := conf.QUEUES[name].rate_limit) is not None
        },
        sequential=frozenset(name for name in chosen if conf.QUEUES[name].sequential_lanes),
        worker_concurrency=conf.WORKER_CONCURRENCY,
        shares={
            name: QueueShare(conf.QUEUES[name].min_concurrency, conf.QUEUES[name].weight)
            for name in chosen
        },
        declared=declared(conf, registry.jobs()),
        runtime_snapshot_interval_s=conf.RUNTIME_SNAPSHOT_INTERVAL_S,
        session=conf.WORKER_SESSION,
        pool_size=conf.WORKER_POOL_SIZE,
        job_log=JobLogConfig.from_settings(conf),
    )


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _utcnow() -> datetime:
    return datetime.now(UTC)


class WorkerProcess:
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
        self._session: SharedSession | None = None
        self._wake: WakeLocks | None = None
        self._callbacks: CallbackHub | None = None
        self.maintainer: Maintainer | None = None
        self._control: ConcurrencyControl | None = None
        self._dispatch_tasks: list[asyncio.Task[None]] = []

    def request_stop(self) -> None:
        """Begin a graceful shutdown (safe to call more than once)."""
        if not self.stopping.is_set():
            self.stopping.set()
            for dispatcher in self._dispatchers.values():
                dispatcher.cancel_in_flight()

    def running_attempts(self) -> Iterator[ExecutingAttempt]:
        for dispatcher in self._dispatchers.values():
            yield from dispatcher.attempts()

    def _on_dispatcher_done(self, task: asyncio.Task[None]) -> None:
        # A dispatcher only returns when stopping; anything else is a bug that must not leave
        # the process looking alive while claiming nothing.
        if not task.cancelled() and task.exception() is not None:
            logger.error(
                "dispatcher crashed, stopping the worker task=%s",
                task.get_name(),
                exc_info=task.exception(),
            )
            self.request_stop()

    def _snapshot_state(self) -> tuple[int, bool, bool, bool]:
        """(in-flight jobs, leading, healthy, shutting down) for the instance snapshot. Healthy:
        every dispatcher is still running (a crashed one stops the worker anyway)."""
        in_flight = sum(len(d.in_flight) for d in self._dispatchers.values())
        leading = self.maintainer is not None and self.maintainer.is_leader
        stopping = self.stopping.is_set()
        # Dispatchers end by design once stopping; before that an ended one has crashed.
        healthy = stopping or not any(task.done() for task in self._dispatch_tasks)
        return in_flight, leading, healthy, stopping

    def _on_notify(self, queue: str) -> None:
        dispatcher = self._dispatchers.get(queue)
        if dispatcher is not None:
            dispatcher.poke()

    def _on_listening(self) -> None:
        # The session is (back) up: work committed while it was down notified no one, nor did
        # resumes of sequential callback waits (the wake locks forgot what the lost connection
        # held). Every dispatcher claims once, every wait polls once.
        for dispatcher in self._dispatchers.values():
            dispatcher.poke()
        if self._callbacks is not None:
            self._callbacks.wake_all()
        if self._control is not None:
            self._control.poke()

    def _on_control(self, queue: str) -> None:
        if self._control is not None:
            self._control.poke(queue)

    def _on_cancel(self, job_id: int, run_lease: int) -> None:
        if self._callbacks is not None:
            self._callbacks.wake(job_id, run_lease)
        for dispatcher in self._dispatchers.values():
            if dispatcher.cancel_attempt(job_id, run_lease):
                logger.info("attempt cancelled job_id=%s run_lease=%s", job_id, run_lease)

    async def run(self) -> RunSummary:
        config = self.config
        schedules = declared_schedule_rows()
        # AWA["WORKER_POOL_SIZE"] connections (2) for every claim, completion, heartbeat and
        # maintenance pass, whatever the concurrency and the number of queues: each statement
        # is short and batched. With one, claims wait behind completions: the drain measured
        # 0.6-0.9x of two's (docs/benchmarks.md, "Connections per worker").
        pool = await connections.open_pool(
            config.database_alias, max_size=config.pool_size, prepare=config.session
        )
        await publish_schedules(pool, schedules)
        weighted = (
            WeightedPermits(config.worker_concurrency, config.shares)
            if config.worker_concurrency is not None
            else None
        )
        threads = HandlerThreads(
            max(1, config.worker_concurrency or sum(config.queues.values())),
            name_prefix="awa-job",
        )
        completer = Completer(
            pool,
            batch_size=config.completion_batch_size,
            flush_s=config.completion_flush_s,
            policy=config.retry_policy,
            now=_utcnow,
            wake_after_close=config.sequential,
            dlq_queues=config.job_log.dlq_queues,
        )
        job_log = JobLog(config.job_log)
        promoter = Promoter(pool, config.promoter)
        self._callbacks = CallbackHub(
            pool,
            loop=asyncio.get_running_loop(),
            claimed_by=self.identity,
            poll_interval_s=config.poll_interval_s,
            stopping=self.stopping,
        )
        # The one session connection: LISTEN (a worker with queues), the wake locks and the
        # leader lock (docs/deployment.md, "Scaling").
        notifier = Notifier(
            on_queue=self._on_notify,
            on_cancel=self._on_cancel,
            on_callback=self._callbacks.wake,
            on_control=self._on_control,
        )
        session = self._session = (
            SharedSession(
                lambda: connections.connect(config.database_alias),
                listen=LISTEN_CHANNELS if config.queues else (),
                on_notify=notifier.dispatch,
                on_listening=self._on_listening,
            )
            if config.session
            else None
        )
        # A burst run exits once it finds nothing, so it never waits for a notification; a
        # poll-only one has no session to hold wake locks on.
        wake = self._wake = (
            WakeLocks(session)
            if session is not None and config.queues and not config.burst
            else None
        )
        for queue, concurrency in config.queues.items():
            self._dispatchers[queue] = Dispatcher(
                queue=queue,
                concurrency=concurrency,
                deadline_s=config.deadlines.get(queue, 0.0),
                claim_batch_size=config.claim_batch_size,
                poll_interval_s=config.poll_interval_s,
                claimed_by=self.identity,
                pool=pool,
                completer=completer,
                threads=threads,
                job_log=job_log,
                resolve=self._resolve,
                policy=config.retry_policy,
                now=_utcnow,
                aging_s=config.aging_s.get(queue, 0.0),
                sequential=queue in config.sequential,
                permits=weighted.for_queue(queue) if weighted is not None else None,
                rate_limit=config.rate_limits.get(queue),
                callbacks=self._callbacks,
                wake=wake,
            )
        control = self._control = ConcurrencyControl(
            pool,
            self._dispatchers,
            configured=config.queues,
            threads=threads if weighted is None else None,
            # With a session, changes arrive by notification and the read is only a safety net.
            interval_s=config.runtime_snapshot_interval_s
            * (DECLARATIONS_EVERY if config.session else 1),
        )
        reporter = InstanceReporter(
            pool,
            instance_id=self.identity,
            queues=dict(config.queues),
            declared=config.declared,
            interval_s=config.runtime_snapshot_interval_s,
            started_at=_utcnow(),
            state=self._snapshot_state,
            concurrency=control.effective,
        )
        if config.queues:
            # Before the first claim: a queue an operator set keeps its value across restarts.
            try:
                await control.refresh()
            except Exception:
                logger.exception("reading the queues' live concurrency failed")
        # Before the first claim: close_attempts must know the DLQ policies of our queues.
        await reporter.report_once()
        completer.start()
        drained = asyncio.Event()  # set once in-flight work is done: heartbeats and leadership stop
        background = self._start_background(pool, session, promoter, completer, drained)
        background.append(
            asyncio.create_task(
                reporter.run(
                    self.stopping,
                    drained,
                    None if self.maintainer is None else self.maintainer.leadership_changed,
                ),
                name="awa-reporter",
            )
        )
        background.append(asyncio.create_task(job_log.run(drained), name="awa-job-log"))
        if config.queues:
            background.append(
                asyncio.create_task(control.run(self.stopping), name="awa-concurrency")
            )
        dispatch = [
            asyncio.create_task(d.run(self.stopping), name=f"awa-dispatch-{q}")
            for q, d in self._dispatchers.items()
        ]
        self._dispatch_tasks = dispatch
        for task in dispatch:
            task.add_done_callback(self._on_dispatcher_done)
        await self._wait_listening()
        self.ready.set()
        log_ready(
            logger,
            self.identity,
            config.queues,
            maintenance=config.maintenance is not None,
            burst=config.burst,
        )
        try:
            await self.stopping.wait()
        finally:
            abandoned = await self._drain(dispatch, completer)
            drained.set()
            # The listener only ends by cancellation; the other background tasks watch
            # `drained` and finish their current pass (the leader releases its lock).
            for task in background:
                if task.get_name() in ("awa-session", "awa-burst"):
                    task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            if wake is not None:
                await wake.close()
            if session is not None:
                await session.close()
            await reporter.withdraw()
            await pool.close()
            threads.shutdown()
            # The connection async handlers used through sync_to_async lives on asgiref's thread.
            await sync_to_async(db_connections.close_all)()
        job_log.flush()
        summary = RunSummary(
            claimed=sum(d.claimed_count for d in self._dispatchers.values()),
            closed=completer.closed_counts,
            stale=completer.stale_count,
            abandoned=abandoned,
        )
        summary.log(logger)
        return summary

    def _start_background(
        self,
        pool: AsyncConnectionPool[Any],
        session: SharedSession | None,
        promoter: Promoter,
        completer: Completer,
        drained: asyncio.Event,
    ) -> list[asyncio.Task[None]]:
        config = self.config
        tasks: list[asyncio.Task[None]] = []
        if session is not None and config.queues:
            tasks.append(asyncio.create_task(session.run(drained), name="awa-session"))
        if config.queues:
            heartbeat = Heartbeat(
                pool,
                self.running_attempts,
                interval_s=config.heartbeat_interval_s,
                claimed_by=self.identity,
                completer=completer,
                policy=config.retry_policy,
                now=_utcnow,
            )
            tasks.append(asyncio.create_task(heartbeat.run(drained), name="awa-heartbeat"))
        if config.maintenance is not None:
            self.maintainer = Maintainer(
                pool,
                config.maintenance,
                session=session,
                instance_id=self.identity,
                promoter=promoter,
                policy=config.retry_policy,
                now=_utcnow,
            )
            tasks.extend(self.maintainer.start(drained))
        if config.burst:
            tasks.append(
                asyncio.create_task(self._watch_burst(pool, promoter, completer), name="awa-burst")
            )
        return tasks

    async def _wait_listening(self) -> None:
        if self._session is not None and self.config.queues:
            await asyncio.wait_for(self._session.listening.wait(), timeout=30)

    async def _drain(self, dispatch: list[asyncio.Task[None]], completer: Completer) -> int:
        """Stop claiming, then give in-flight jobs and the writes of their results until the
        shutdown timeout to finish."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.shutdown_timeout_s
        await asyncio.gather(*dispatch, return_exceptions=True)
        in_flight = [t for d in self._dispatchers.values() for t in d.in_flight]
        abandoned = 0
        if in_flight:
            logger.info("draining in-flight jobs count=%s", len(in_flight))
            _, pending = await asyncio.wait(in_flight, timeout=max(deadline - loop.time(), 0))
            abandoned = len(pending)
            if pending:
                # Their attempts stay open in storage and are rescued like a crashed worker's.
                logger.warning("shutdown timeout, abandoning in-flight jobs count=%s", abandoned)
                for task in pending:
                    task.cancel()
        # Every result in hand gets one write, even past the deadline; a write that keeps
        # failing is given up there (Completer.stop).
        await completer.stop(deadline)
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
            # Every check below awaits, and a dispatcher may claim (say, a job the leader just
            # promoted) meanwhile: any claim since this point means start over.
            claimed_before = self._claimed_total()
            await completer.drain()
            if (await promoter.run_once()).moved:
                for dispatcher in self._dispatchers.values():
                    dispatcher.poke()
                continue
            async with pool.connection() as conn:
                due_in = await seconds_until_next_due(conn, queues=queues)
            if due_in is not None and due_in <= self.config.burst_wait_s:
                await asyncio.sleep(max(due_in, 0.0) + 0.01)
                continue
            # Work may have become ready since the dispatchers last looked (the leader's own
            # promotion pass, a NOTIFY in flight): one more claim round must come back empty.
            if await self._claimed_in_confirmation_round(since=claimed_before):
                continue
            logger.info("burst finished: nothing runnable or due soon")
            self.request_stop()
            return

    def _claimed_total(self) -> int:
        return sum(d.claimed_count for d in self._dispatchers.values())

    async def _claimed_in_confirmation_round(self, *, since: int) -> bool:
        rounds = {d: d.claim_rounds for d in self._dispatchers.values()}
        for dispatcher in self._dispatchers.values():
            dispatcher.poke()
        # Only a claim that started after the poke can have seen the newest commits.
        while not all(d.idle and d.claim_rounds > rounds[d] for d in self._dispatchers.values()):
            await asyncio.sleep(0.01)
        return self._claimed_total() != since
