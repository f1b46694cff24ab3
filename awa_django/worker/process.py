"""The process root: one config, built once from settings, becomes every service of one
process, which runs until it is told to stop (or, in burst mode, until there is nothing left
to do). ``awa_worker`` runs it with queues; ``awa_maintenance`` runs it with none.

Services (``worker.service``), in start order: the connection pool (one autocommit pool for
claims, completions and maintenance passes), the handler threads, the instance reporter (cron
schedules, declarations, the runtime snapshot), the session connection (LISTEN, the wake locks
and the leader lock), the completer, the job log, the heartbeat, the maintainer (the leader
elector and the maintenance services it runs while leading), the wake locks, the dispatchers
(one per queue) and the burst watcher. A process with no queues builds only the pool, the
reporter, the session and the maintainer.

Every stop takes one path (SIGTERM/SIGINT, the end of a burst, a crashed dispatcher, a service
that failed to start): the started services stop in reverse. So the process stops claiming,
raises the cancel flags of running attempts, waits for in-flight jobs up to the shutdown
timeout while heartbeats continue, then stops the heartbeat and the maintainer (leadership
released), flushes the completer, and closes connections last. Attempts still running at the
deadline are left open in storage and rescued like a crashed worker's: never lost.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
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
from awa_django.core.session_tries import SessionTries
from awa_django.declarations.jobs import DeclaredJob, registry
from awa_django.maintenance.leader import NON_LEADER_TRY_INTERVALS
from awa_django.maintenance.maintainer import Maintainer, MaintenanceConfig
from awa_django.maintenance.promoter import Promoter, PromoterConfig
from awa_django.ops.cron_publish import declared_schedule_rows
from awa_django.ops.descriptors import Declarations, declared
from awa_django.storage import connections
from awa_django.storage.session import SharedSession
from awa_django.worker.burst import BurstWatcher
from awa_django.worker.completer import Completer
from awa_django.worker.control import ConcurrencyControl
from awa_django.worker.dispatcher import Dispatcher, DispatcherConfig, ExecutingAttempt
from awa_django.worker.dispatchers import Dispatchers
from awa_django.worker.handler_threads import HandlerThreads
from awa_django.worker.heartbeat import Heartbeat
from awa_django.worker.job_log import JobLog, JobLogConfig
from awa_django.worker.notifier import LISTEN_CHANNELS, Notifier
from awa_django.worker.rate_limit import RateLimit
from awa_django.worker.reporter import RuntimeReporter
from awa_django.worker.service import Service, Services, Shutdown
from awa_django.worker.wake import TAKEN_RETRY_POLLS, WakeLocks
from awa_django.worker.weighted import QueueShare, WeightedPermits

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerConfig:
    """Everything one process needs (a worker, or ``awa_maintenance`` with no queues), resolved
    from settings and command options."""

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
    # A runtime row silent this long is dead (AWA["RUNTIME_STALE_AFTER_S"]): an idle process
    # refreshes its row three times within it.
    runtime_stale_after_s: float = 60.0
    # False (AWA["WORKER_SESSION"]): poll-only, no session connection (no LISTEN, no wake
    # locks, a leader lease instead of the session lock), for a transaction pooler.
    session: bool = True
    # Connections of the pool for claims, completions and maintenance (AWA["WORKER_POOL_SIZE"]).
    pool_size: int = 2
    job_log: JobLogConfig = field(default_factory=JobLogConfig)
    # With queues in several databases: the queues of this process's database, whose declared
    # schedules it publishes there (its leader fires them); None: every schedule.
    schedule_queues: frozenset[str] | None = None
    # The DATABASES alias whose queues these are (a queue's "database"), which database_alias
    # reaches (the same, or AWA["WORKER_DATABASE"] for AWA["DATABASE_ALIAS"]).
    database: str = "default"

    def schedules(self) -> list[dict[str, Any]]:
        """The declared schedules this process publishes to its database."""
        rows = declared_schedule_rows()
        if self.schedule_queues is None:
            return rows
        return [row for row in rows if row["queue"] in self.schedule_queues]

    def dispatcher(self, queue: str, *, claimed_by: str) -> DispatcherConfig:
        """The config of ``queue``'s dispatcher in the process ``claimed_by``."""
        return DispatcherConfig(
            queue=queue,
            concurrency=self.queues[queue],
            claim_batch_size=self.claim_batch_size,
            poll_interval_s=self.poll_interval_s,
            claimed_by=claimed_by,
            policy=self.retry_policy,
            deadline_s=self.deadlines.get(queue, 0.0),
            aging_s=self.aging_s.get(queue, 0.0),
            sequential=queue in self.sequential,
            rate_limit=self.rate_limits.get(queue),
        )


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

    def log(self) -> None:
        """The last line of a worker or ``awa_maintenance`` process."""
        logger.info(
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
    identity: str,
    queues: Mapping[str, int],
    *,
    maintenance: bool,
    burst: bool,
    database: str = "default",
) -> None:
    """The first line of a worker or ``awa_maintenance`` process (one per database served)."""
    logger.info(
        "worker ready identity=%s queues=%s maintenance=%s burst=%s database=%s",
        identity,
        dict(queues),
        maintenance,
        burst,
        database,
    )


def config_from_settings(
    conf: AwaSettings,
    *,
    queues: Mapping[str, int] | None = None,
    burst: bool = False,
    burst_wait_s: float = 0.0,
    shutdown_timeout_s: float | None = None,
    maintenance: bool = True,
    database: str | None = None,
) -> WorkerConfig:
    """The one config of a process, from ``AWA`` settings (the only place the process reads
    them); ``queues`` defaults to every declared queue of ``database`` (an empty mapping: the
    maintenance-only process of ``awa_maintenance``). ``database`` (default
    ``AWA["DATABASE_ALIAS"]``) is the alias whose queues it serves and whose leader it may be;
    ``AWA["WORKER_DATABASE"]`` replaces ``DATABASE_ALIAS`` alone."""
    database = database or conf.DATABASE_ALIAS
    on_database = frozenset(name for name in conf.QUEUES if conf.queue_database(name) == database)
    chosen = (
        dict(queues)
        if queues is not None
        else {n: q.concurrency for n, q in conf.QUEUES.items() if n in on_database}
    )
    return WorkerConfig(
        # WORKER_DATABASE stands for DATABASE_ALIAS alone; another database is reached directly.
        database_alias=(
            (conf.WORKER_DATABASE or database) if database == conf.DATABASE_ALIAS else database
        ),
        schedule_queues=on_database if len(conf.databases) > 1 else None,
        database=database,
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
        declared=declared(conf, registry.jobs(), database=database),
        runtime_snapshot_interval_s=conf.RUNTIME_SNAPSHOT_INTERVAL_S,
        runtime_stale_after_s=conf.RUNTIME_STALE_AFTER_S,
        session=conf.WORKER_SESSION,
        # Without queues, one connection for the maintenance passes (and one session).
        pool_size=conf.WORKER_POOL_SIZE if chosen else 1,
        job_log=JobLogConfig.from_settings(conf),
    )


def configs_per_database(
    conf: AwaSettings,
    *,
    queues: Mapping[str, int] | None = None,
    database: str | None = None,
    **options: Any,
) -> list[WorkerConfig]:
    """One config per database this process serves (``WorkerGroup``): ``database`` alone, or
    every database holding one of ``queues`` (default: every database holding a queue; with an
    empty mapping, every database, for ``awa_maintenance``). ``options`` as for
    ``config_from_settings``."""
    if database is not None:
        return [config_from_settings(conf, queues=queues, database=database, **options)]
    if queues is None or not queues:
        return [
            config_from_settings(conf, queues=queues, database=alias, **options)
            for alias in conf.databases
        ]
    by_database: dict[str, dict[str, int]] = {}
    for name, concurrency in queues.items():
        by_database.setdefault(conf.queue_database(name), {})[name] = concurrency
    return [
        config_from_settings(conf, queues=chosen, database=alias, **options)
        for alias, chosen in by_database.items()
    ]


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Connections:
    """The process's pool: opened first, closed last, with the Django connections async
    handlers and signal receivers used on asgiref's thread."""

    name = "connections"

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self.pool = pool

    async def start(self) -> None:
        await self.pool.open(wait=True)

    async def stop(self) -> None:
        await self.pool.close()
        await sync_to_async(db_connections.close_all)()


class WorkerProcess:
    """The root of one process (a worker, or ``awa_maintenance`` with no queues)."""

    def __init__(
        self, config: WorkerConfig, resolve: Callable[[str], DeclaredJob[Any, Any] | None]
    ) -> None:
        self.config = config
        self._resolve = resolve
        self.identity = worker_identity()
        self._shutdown = Shutdown(config.shutdown_timeout_s)
        self.stopping = self._shutdown.requested
        self.ready = asyncio.Event()
        self._dispatchers = Dispatchers(self._shutdown, on_crash=self.request_stop)
        self._callbacks: CallbackHub | None = None
        self._completer: Completer | None = None
        self.maintainer: Maintainer | None = None
        self._control: ConcurrencyControl | None = None

    def request_stop(self) -> None:
        """Begin a graceful shutdown (safe to call more than once)."""
        if self._shutdown.request():
            self._dispatchers.cancel_in_flight()

    def running_attempts(self) -> Iterator[ExecutingAttempt]:
        return self._dispatchers.attempts()

    def _snapshot_state(self) -> tuple[int, bool, bool, bool]:
        """(in-flight jobs, leading, healthy, shutting down) for the instance snapshot. Healthy:
        every dispatcher is still running (a crashed one stops the worker anyway)."""
        leading = self.maintainer is not None and self.maintainer.is_leader
        return (
            self._dispatchers.in_flight_count,
            leading,
            not self._dispatchers.crashed,
            self.stopping.is_set(),
        )

    def _on_notify(self, queue: str) -> None:
        dispatcher = self._dispatchers.by_queue.get(queue)
        if dispatcher is not None:
            dispatcher.notified()

    def _on_handover(self, queue: str) -> None:
        dispatcher = self._dispatchers.by_queue.get(queue)
        if dispatcher is not None:
            dispatcher.poke()

    def _on_listening(self) -> None:
        # The session is (back) up: work committed while it was down notified no one, nor did
        # resumes of sequential callback waits (the wake locks forgot what the lost connection
        # held). Every dispatcher claims once, every wait polls once.
        self._dispatchers.poke()
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
        for dispatcher in self._dispatchers:
            if dispatcher.cancel_attempt(job_id, run_lease):
                logger.info("attempt cancelled job_id=%s run_lease=%s", job_id, run_lease)

    def _services(self) -> list[Service]:
        """Every service of this process, built from the config, in start order."""
        config = self.config
        # AWA["WORKER_POOL_SIZE"] connections (2) for every claim, completion, heartbeat and
        # maintenance pass, whatever the concurrency and the number of queues: each statement
        # is short and batched. With one, claims wait behind completions: the drain measured
        # 0.6-0.9x of two's (docs/benchmarks.md, "Connections per worker").
        pool = connections.new_pool(
            config.database_alias, max_size=config.pool_size, prepare=config.session
        )
        promoter = Promoter(pool, config.promoter)
        listening = bool(config.queues)
        if listening:
            self._callbacks = CallbackHub(
                pool,
                loop=asyncio.get_running_loop(),
                claimed_by=self.identity,
                poll_interval_s=config.poll_interval_s,
                stopping=self.stopping,
            )
        notifier = Notifier(
            on_queue=self._on_notify,
            on_handover=self._on_handover,
            on_cancel=self._on_cancel,
            on_callback=None if self._callbacks is None else self._callbacks.wake,
            on_control=self._on_control,
        )
        # The one session connection: LISTEN (a worker with queues), the wake locks and the
        # leader lock (docs/deployment.md, "Scaling").
        session = (
            SharedSession(
                lambda: connections.connect(config.database_alias),
                listen=LISTEN_CHANNELS if listening else (),
                on_notify=notifier.dispatch,
                on_listening=self._on_listening,
            )
            if config.session
            else None
        )
        # A worker's periodic session tries (the leader lock, its queues' candidate locks), in
        # one statement per tick (#37); a burst run never waits, so it tries the leader only.
        bases = [
            *(
                [config.poll_interval_s * TAKEN_RETRY_POLLS]
                if listening and not config.burst
                else []
            ),
            *(
                [config.maintenance.leader_interval_s * NON_LEADER_TRY_INTERVALS]
                if config.maintenance is not None
                else []
            ),
        ]
        tries = SessionTries(session, base_s=min(bases)) if session is not None and bases else None
        if config.maintenance is not None:
            self.maintainer = Maintainer(
                pool,
                config.maintenance,
                session=session,
                instance_id=self.identity,
                promoter=promoter,
                policy=config.retry_policy,
                now=_utcnow,
                tries=tries,
            )
        control = self._control = ConcurrencyControl(
            pool,
            self._dispatchers.by_queue,
            configured=config.queues,
            threads=None,  # set below for a worker in hard-reserved mode
        )
        reporter = RuntimeReporter(
            pool,
            instance_id=self.identity,
            queues=dict(config.queues),
            declared=config.declared,
            schedules=config.schedules(),
            interval_s=config.runtime_snapshot_interval_s,
            stale_after_s=config.runtime_stale_after_s,
            started_at=_utcnow(),
            state=self._snapshot_state,
            stopping=self.stopping,
            changed=None if self.maintainer is None else self.maintainer.leadership_changed,
            on_peers=None if tries is None else tries.set_peers,
            concurrency=control.effective,
            on_concurrency=control.apply,
            # With a session, changes arrive by notification, and the snapshots written whole
            # (at least every DECLARATIONS_EVERY intervals) read the values as a safety net; a
            # poll-only process reads them with every refresh of its snapshot as well.
            refresh_reads_concurrency=listening and not config.session,
        )
        services: list[Service] = [Connections(pool)]
        if not listening:
            # Maintenance only: no jobs, so no threads, completer, job log or heartbeat.
            services.append(reporter)
            services.extend(s for s in (session, tries, self.maintainer) if s is not None)
            return services
        threads = HandlerThreads(
            max(1, config.worker_concurrency or sum(config.queues.values())),
            name_prefix="awa-job",
        )
        completer = self._completer = Completer(
            pool,
            batch_size=config.completion_batch_size,
            flush_s=config.completion_flush_s,
            policy=config.retry_policy,
            now=_utcnow,
            wake_after_close=config.sequential,
            dlq_queues=config.job_log.dlq_queues,
            deadline=lambda: self._shutdown.deadline,
        )
        job_log = JobLog(config.job_log)
        heartbeat = Heartbeat(
            pool,
            self.running_attempts,
            interval_s=config.heartbeat_interval_s,
            claimed_by=self.identity,
            completer=completer,
            policy=config.retry_policy,
            now=_utcnow,
        )
        # A burst run exits once it finds nothing, so it never waits for a notification; a
        # poll-only one has no session to hold wake locks on.
        wake = WakeLocks(session, tries=tries) if session is not None and not config.burst else None
        weighted = (
            WeightedPermits(config.worker_concurrency, config.shares)
            if config.worker_concurrency is not None
            else None
        )
        for queue in config.queues:
            self._dispatchers.add(
                Dispatcher(
                    config.dispatcher(queue, claimed_by=self.identity),
                    pool=pool,
                    completer=completer,
                    threads=threads,
                    job_log=job_log,
                    resolve=self._resolve,
                    now=_utcnow,
                    permits=weighted.for_queue(queue) if weighted is not None else None,
                    callbacks=self._callbacks,
                    wake=wake,
                )
            )
        if weighted is None:
            # Weighted mode's threads already cover the process-wide limit, which a queue's
            # live cap can only lower.
            control.threads = threads
        # Before the completer and the first claim: the live concurrency operators set (read
        # when the control starts), and the DLQ policies of our queues, which close_attempts
        # must know and the reporter publishes when it starts.
        services += [threads, control, reporter]
        services += [s for s in (session, tries, completer, job_log, heartbeat) if s is not None]
        services += [s for s in (self.maintainer, wake) if s is not None]
        services.append(self._dispatchers)
        if config.burst:
            services.append(
                BurstWatcher(
                    pool=pool,
                    dispatchers=self._dispatchers,
                    promoter=promoter,
                    completer=completer,
                    wait_s=config.burst_wait_s,
                    finished=self.request_stop,
                )
            )
        return services

    async def run(self) -> RunSummary:
        services = Services()
        try:
            await services.start(self._services())
            self.ready.set()
            log_ready(
                self.identity,
                self.config.queues,
                maintenance=self.config.maintenance is not None,
                burst=self.config.burst,
                database=self.config.database,
            )
            await self.stopping.wait()
        finally:
            # The one way out: a stop asked for, a service that failed to start, or a
            # cancellation; whatever started stops, the last started first.
            self.request_stop()
            await services.stop()
        completer = self._completer
        summary = RunSummary(
            claimed=self._dispatchers.claimed,
            closed=OutcomeCounts() if completer is None else completer.closed_counts,
            stale=0 if completer is None else completer.stale_count,
            abandoned=self._dispatchers.abandoned,
        )
        summary.log()
        return summary


class WorkerGroup:
    """The process roots of one OS process, one per database it serves (a queue's
    ``database``): each has its own connections (pool and session, so its own LISTEN), its own
    claims, completions and heartbeats, and competes for its own database's maintenance
    leadership. With one database it is that database's ``WorkerProcess`` alone."""

    def __init__(
        self,
        configs: Sequence[WorkerConfig],
        resolve: Callable[[str], DeclaredJob[Any, Any] | None],
    ) -> None:
        self.members = [WorkerProcess(config, resolve) for config in configs]

    def request_stop(self) -> None:
        for member in self.members:
            member.request_stop()

    async def run(self) -> RunSummary:
        if len(self.members) == 1:
            return await self.members[0].run()
        tasks = [asyncio.create_task(member.run()) for member in self.members]
        # In burst mode each database drains on its own; otherwise one member ending (a service
        # that failed, a crashed dispatcher) stops the others: half a worker is not running.
        burst = all(member.config.burst for member in self.members)
        pending: set[asyncio.Task[RunSummary]] = set(tasks)
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                if not burst or any(task.exception() is not None for task in done):
                    self.request_stop()
        finally:
            self.request_stop()
            await asyncio.gather(*tasks, return_exceptions=True)
        summaries = [task.result() for task in tasks]
        return RunSummary(
            claimed=sum(s.claimed for s in summaries),
            closed=OutcomeCounts.of(
                sum((Counter(s.closed.fields()) for s in summaries), Counter[str]())
            ),
            stale=sum(s.stale for s in summaries),
            abandoned=sum(s.abandoned for s in summaries),
        )
