"""One queue's dispatch loop: wait for work, reserve permits, claim a batch, start executions.

How it works: a dispatcher owns its queue's permits (the queue's concurrency in this process).
It sleeps until a NOTIFY for its queue, a poke from the worker process, or the poll interval (right
after work it polls for a few milliseconds instead, and producers only notify a worker that
waits: ``worker.wake``); then it reserves every free permit (at most one claim batch), claims
that many jobs in one round trip and starts one task per job. Each task runs the handler,
hands the completion to the completer and returns its permit. A permit is always taken before
the claim, so every claimed job already has a slot in this process. When a claim fills every
permit it asked for, there is probably more work: the dispatcher starts the next claim with the
permits still free before it starts the jobs it just got, and does not sleep. While its claims
queue at the lane behind other processes' (a fleet on one queue), it claims in turn at once and
waits for half its permits, at least two, before it claims (``Dispatcher._contended_least``).

Scheduling (docs/scheduling.md): in weighted mode the permits are this queue's view of one
process-wide limit (``worker.weighted``); a queue with a per-process rate limit waits for a
token before it takes permits (``worker.rate_limit``), one with a fleet-wide limit claims
through the database's budget and sleeps as long as that budget says; priority aging is
applied on one claim per refresh period.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from psycopg import AsyncConnection
from psycopg.errors import LockNotAvailable
from psycopg_pool import AsyncConnectionPool

from awa_django.callbacks.waiting import AttemptCallbacks, CallbackHub
from awa_django.core.claimed_job import ClaimedJob, claimed_job_rows
from awa_django.core.completion import completed, result_to_completion
from awa_django.core.events import wait_for_any
from awa_django.core.retry import RetryPolicy
from awa_django.declarations.jobs import DeclaredJob, JobContext
from awa_django.exceptions import Cancel, RetryAfter, Snooze, WaitForCallback
from awa_django.storage.queue import ClaimRequest, claim_ready, claim_ready_in_turn
from awa_django.storage.rate_limits import FleetBudget, claim_ready_limited
from awa_django.storage.statement import run_async
from awa_django.telemetry import get_telemetry
from awa_django.worker.completer import Completer
from awa_django.worker.deadline import AttemptDeadline
from awa_django.worker.executor import context_for, execute
from awa_django.worker.handler_threads import HandlerThreads
from awa_django.worker.job_log import JobLog
from awa_django.worker.rate_limit import RateLimit, TokenBucket
from awa_django.worker.wake import IdleWait, WakeLocks
from awa_django.worker.weighted import QueuePermits

logger = logging.getLogger(__name__)

# Longest time between two claims that compare lanes by aged priority (see _claim_aged).
AGING_REFRESH_MAX_S = 1.0
# Longest a claim waits for its turn at a lane's claim lock (see _claim_in_turn); past it, the
# dispatcher goes idle as after an empty claim.
TURN_TIMEOUT_S = 1.0
# While claims of its queue wait their turn at the lane (see Dispatcher._contended_least), a
# dispatcher claims again once this share of its slots is free, and at least two of them (all
# it has, if fewer), or once one is free and the others stayed busy this long.
CONTENDED_CLAIM_SHARE = 0.5
CONTENDED_PATIENCE_S = 0.05
# While contended, every this many claims in a row that went straight to their turn, one claim
# tries the lane first, as an uncontended one does: it comes back empty while others still
# queue at the lane (then the claim waits its turn), and takes jobs at once when they no longer
# do, which ends the wait for several slots.
CONTENDED_PROBE_EVERY = 8
# Least time between two connection checks of the async handlers' ORM thread (see
# _refresh_loop_thread_connection).
ORM_THREAD_CHECK_INTERVAL_S = 1.0


def start_task(
    coro: Coroutine[Any, Any, None],
    *,
    name: str | None = None,
    loop: asyncio.AbstractEventLoop | None = None,
) -> asyncio.Task[None]:
    """A task for ``coro`` whose first step runs now, in the caller, where Python allows it
    (3.12+): a handler that finishes without waiting (a no-op, a cache hit) then costs no trip
    through the event loop, and one that waits starts its I/O a loop turn sooner. Otherwise
    scheduled for the loop's next turn. Either way the coroutine runs in its own copy of the
    context, under ``name``.

    Built as ``asyncio.Task`` directly, not through ``asyncio.create_task``: that wrapper and
    the loop's ``create_task`` behind it (a closed-loop check, a debug-mode check, the name set
    afterwards through a helper) were six Python calls for every job, the task's constructor
    does the same in C. Like the eager path, this does not go through a task factory the loop
    may have (the worker installs none). ``loop`` is the running loop, when the caller has it
    at hand: a batch's jobs look it up once, not once each."""
    if loop is None:
        loop = asyncio.get_running_loop()
    if sys.version_info >= (3, 12):
        return asyncio.Task(coro, loop=loop, name=name, eager_start=True)
    return asyncio.Task(coro, loop=loop, name=name)


class Permits:
    """Counts free execution slots; ``reserve`` waits for at least one and takes up to ``n``."""

    def __init__(self, total: int) -> None:
        self.configured = total
        self.total = total
        self.free = total
        self._released = asyncio.Event()
        # Whether ``reserve`` waits for a release: only then does a release signal (every
        # finished job releases its slot, and the event's set is a call).
        self._waiting = False

    def resize(self, total: int | None) -> None:
        """Allow ``total`` slots from now on (None: the configured number). Lowered below what
        is in use, ``free`` goes negative: running jobs keep their slots, and none is handed
        out again until enough of them have finished."""
        total = self.configured if total is None else total
        self.free += total - self.total
        self.total = total
        self._released.set()

    async def reserve(
        self, n: int, stopping: asyncio.Event, *, least: int = 1, patience_s: float = 0.0
    ) -> int:
        """Take between 1 and ``n`` free slots, or 0 once ``stopping`` is set. With ``least``
        above 1: once one is free, wait up to ``patience_s`` more for ``least`` of them (all
        the slots there are, if fewer)."""
        while self.free <= 0 and not stopping.is_set():
            await self._released_or(stopping)
        least = min(least, self.total)
        if self.free < least and not stopping.is_set():
            loop = asyncio.get_running_loop()
            deadline = loop.time() + patience_s
            while self.free < least and not stopping.is_set():
                left = deadline - loop.time()
                if left <= 0:
                    break
                await self._released_or(stopping, timeout=left)
        if stopping.is_set():
            return 0
        return self.try_reserve(n)

    async def _released_or(self, stopping: asyncio.Event, timeout: float | None = None) -> None:
        """Wait for a release (or a resize), ``stopping`` or ``timeout``."""
        self._released.clear()
        self._waiting = True
        try:
            await wait_for_any(self._released, stopping, timeout=timeout)
        finally:
            self._waiting = False

    def try_reserve(self, n: int) -> int:
        """Take up to ``n`` free slots without waiting (0 when none is free)."""
        taken = max(0, min(self.free, n))
        self.free -= taken
        return taken

    def release(self, n: int = 1) -> None:
        self.free += n
        if self._waiting:
            # Once: the waiting reserve wakes on its next turn, and the jobs of a batch that
            # finish before it would each set the set event again.
            self._waiting = False
            self._released.set()

    def settle(self, reserved: int, claimed: int) -> None:
        """Give back the permits a claim did not use."""
        self.release(reserved - claimed)


@dataclass(frozen=True, slots=True)
class PendingClaim:
    """A claim and the permits reserved for it: a task when it runs ahead of the jobs of the
    claim before it, else the coroutine, run when awaited."""

    jobs: Awaitable[list[ClaimedJob]]
    wanted: int


# Compared by identity: the dispatcher keeps its running attempts in a set.
@dataclass(slots=True, eq=False)
class ExecutingAttempt:
    """An attempt this process is executing (owned by its dispatcher)."""

    job: ClaimedJob
    # Its kind's handler, looked up once for the claimed batch (None: no handler here).
    handler: DeclaredJob[Any, Any] | None
    ctx: JobContext
    started: float  # monotonic seconds
    deadline: AttemptDeadline | None
    # None until the task exists: its first step may run (and finish) while it is created.
    task: asyncio.Task[None] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatcherConfig:
    """One queue's dispatch settings in one process (the process root builds one per queue)."""

    queue: str
    concurrency: int
    claim_batch_size: int
    poll_interval_s: float
    claimed_by: str  # the process identity the claims carry
    policy: RetryPolicy
    deadline_s: float = 0.0  # attempt deadline (0: none)
    aging_s: float = 0.0  # priority aging interval (0: no aging)
    sequential: bool = False  # the queue's lanes run one job at a time
    rate_limit: RateLimit | None = None


class Dispatcher:
    """Claims and runs the jobs of one queue."""

    def __init__(
        self,
        config: DispatcherConfig,
        *,
        pool: AsyncConnectionPool[Any],
        completer: Completer,
        threads: HandlerThreads,
        job_log: JobLog,
        resolve: Callable[[str], DeclaredJob[Any, Any] | None],
        now: Callable[[], datetime],
        permits: QueuePermits | None = None,
        callbacks: CallbackHub | None = None,
        wake: WakeLocks | None = None,
    ) -> None:
        queue = self.queue = config.queue
        self._callbacks = callbacks
        self._deadline_s = config.deadline_s
        self._request = ClaimRequest(
            queue=queue,
            claimed_by=config.claimed_by,
            deadline_s=config.deadline_s,
            aging_s=config.aging_s,
            sequential=config.sequential,
        )
        self._next_aged_claim = 0.0  # monotonic time from which a claim applies aging again
        # The lane (priority, shard) of the last claim's last job when that claim got every job
        # it asked for (more work is likely there), else None: see _claim_in_turn.
        self._turn_lane: tuple[int, int] | None = None
        # Poked (a NOTIFY for this queue, new work promoted) since the last claim began: an
        # empty claim then probably lost its lane to another claimer too.
        self._notified = False
        # The last claim had to wait its turn at the lane (another process was claiming it)
        # and got every job it asked for: see _contended_least.
        self._contended = False
        # Claims in a row that went straight to their turn (see CONTENDED_PROBE_EVERY).
        self._turns_in_a_row = 0
        self._next_orm_thread_check = 0.0  # monotonic time of the next ORM thread check
        # Weighted mode hands in a view of the process-wide limit; otherwise permits are ours.
        self.permits: Permits | QueuePermits = permits or Permits(config.concurrency)
        rate_limit = self._rate_limit = config.rate_limit
        self._bucket = (
            TokenBucket(rate_limit.rate, rate_limit.burst)
            if rate_limit is not None and not rate_limit.fleet
            else None
        )
        self._fleet_budget = (
            FleetBudget(rate_limit.rate, rate_limit.burst)
            if rate_limit is not None and rate_limit.fleet
            else None
        )
        # Seconds the fleet-wide budget told the last claim to wait (None: not held back).
        self._throttled_for_s: float | None = None
        self._claim_batch_size = config.claim_batch_size
        # None (burst runs): claims wait for a notification or the poll interval, as producers
        # only notify for a worker that holds its queue's wake lock.
        self._idle_wait = IdleWait(queue, wake, poll_interval_s=config.poll_interval_s)
        self._pool = pool
        self._completer = completer
        self._threads = threads
        self._job_log = job_log
        self._resolve = resolve
        self._policy = config.policy
        self._now = now
        self._wakeup = asyncio.Event()
        self._running: set[ExecutingAttempt] = set()
        # Fire-and-forget tasks, held so they are not garbage-collected before they finish.
        self._housekeeping: set[asyncio.Task[None]] = set()
        self._telemetry = get_telemetry()
        # True once a claim came back empty with nothing in flight; cleared by any wakeup.
        self.idle = False
        # Claims started so far: lets the burst check wait for a claim that began after it.
        self.claim_rounds = 0
        self.claimed_count = 0

    def poke(self) -> None:
        """Wake the loop now (a NOTIFY for this queue, or new work promoted)."""
        self.idle = False
        self._notified = True
        self._wakeup.set()

    def notified(self) -> None:
        """A NOTIFY of new work for this queue: wakes the loop unless it sleeps behind another
        process's candidacy. That process was woken by the same notification and claims; every
        listener claiming for each commit was an idle fleet's thundering herd (#37). Should the
        candidate's claim fill, it hands over (``IdleWait.found_work``) and this one is poked."""
        if not self._idle_wait.behind_candidate:
            self.poke()

    def set_concurrency(self, concurrency: int | None) -> None:
        """Run at most ``concurrency`` jobs at once from now on (None: the configured number;
        in weighted mode, a cap on this queue's share). Running jobs are never stopped."""
        self.permits.resize(concurrency)
        # Raised: claim at once with the new permits instead of at the next poll.
        self.poke()

    def cancel_in_flight(self) -> None:
        """Raise the cancel flag of every running attempt (handlers poll ``ctx.is_cancelled``)."""
        for attempt in self._running:
            attempt.ctx.cancel_flag.set()

    def cancel_attempt(self, job_id: int, run_lease: int) -> bool:
        """Raise the cancel flag of one attempt if this dispatcher runs it (its attempt was
        closed elsewhere: the completion its handler makes will be stale, as expected)."""
        for attempt in self._running:
            if attempt.job.job_id == job_id and attempt.job.run_lease == run_lease:
                attempt.ctx.cancel_flag.set()
                self._completer.expect_stale(job_id, run_lease)
                return True
        return False

    def attempts(self) -> list[ExecutingAttempt]:
        return list(self._running)

    @property
    def in_flight(self) -> list[asyncio.Task[None]]:
        return [attempt.task for attempt in self._running if attempt.task is not None]

    async def run(self, stopping: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        # A claim started before the jobs of the previous one (see _claim_ahead); awaited even
        # when stopping, so that the jobs it claims are run, not left open until rescue.
        ahead: PendingClaim | None = None
        while ahead is not None or not stopping.is_set():
            if ahead is None:
                batch = self._claim_batch_size
                if self._bucket is not None:
                    # Tokens before permits: a queue waiting for its rate holds no shared
                    # capacity.
                    batch = await self._bucket.budget(batch, stopping)
                    if not batch:
                        break
                wanted = await self._reserve(batch, stopping)
                if not wanted:
                    break
                # Awaited in place, not as a task: on the path from a NOTIFY to a handler, a task
                # would add two turns of the event loop.
                claim = self._begin_claim(wanted, in_task=False)
            else:
                claim, ahead = ahead, None
            jobs = await claim.jobs
            if self._bucket is not None:
                self._bucket.spend(len(jobs))
            # Idle means "last claim found nothing and nothing runs"; any claimed job clears it,
            # whatever woke us (poke, poll or a drained batch). A claim held back by the fleet's
            # rate budget is not idle: work is waiting.
            self.idle = not jobs and not self._running and self._throttled_for_s is None
            self.permits.settle(claim.wanted, len(jobs))
            full = len(jobs) == claim.wanted
            if full and not stopping.is_set():
                ahead = self._claim_ahead()
                if ahead is not None:
                    # One step for the claim's task: it sends the query before the jobs start.
                    await asyncio.sleep(0)
            if jobs:
                self._telemetry.claimed(jobs, now=self._now())
            # Each kind's handler, looked up once per batch, not once per job.
            handlers = {kind: self._resolve(kind) for kind in {job.kind for job in jobs}}
            if any([handler is not None and handler.is_async for handler in handlers.values()]):
                self._refresh_loop_thread_connection()
            # One clock read for the batch's start, which the heartbeat measures from.
            now = time.monotonic()
            for job in jobs:
                self._start(job, handlers[job.kind], loop, now)
            if jobs:
                # A claim that filled its permits wakes the others; one with slots left keeps
                # this process the queue's candidate, which the next notification wakes alone,
                # unless something else may hold its next claim back (permits shared with other
                # queues, a rate limit) while the others would claim.
                self._idle_wait.found_work(
                    hand_over=full
                    or self._rate_limit is not None
                    or not isinstance(self.permits, Permits)
                )
            if full:
                continue
            if self._throttled_for_s is not None:
                await wait_for_any(stopping, timeout=self._throttled_for_s)
                continue
            await self._idle_wait.sleep(self._wakeup, stopping)

    async def _reserve(self, batch: int, stopping: asyncio.Event) -> int:
        permits = self.permits
        if isinstance(permits, Permits):
            return await permits.reserve(
                batch,
                stopping,
                least=self._contended_least(permits),
                patience_s=CONTENDED_PATIENCE_S,
            )
        return await permits.reserve(batch, stopping)

    def _contended_least(self, permits: Permits) -> int:
        """The free slots to wait for before the next claim: 1, unless the last claim waited
        its turn at the lane and got all it asked for (issue #37).

        A process with few slots (a fleet's, at concurrency 2-4) that claims as soon as one is
        free takes one or two jobs a claim, and claims of one lane run one at a time: a fleet
        of them pays a claim, a close and their wake-ups per job or two, on the workers and on
        the server, where one process with the same total concurrency claims dozens at once.
        While claims queue at the lane, a slot that waits for another to free costs the fleet
        no throughput (the lane serves someone else meanwhile), and the claim it then makes
        takes twice as many jobs. The wait is short (``CONTENDED_PATIENCE_S``), so a slot does
        not idle behind a long job. Claims that do not wait (one process, a queue running dry,
        a lane that other processes stopped queuing at, found by the claim of every
        ``CONTENDED_PROBE_EVERY`` that tries the lane first) keep claiming for a single free
        slot. Rate-limited queues claim as their budget allows.
        """
        if not self._contended or self._rate_limit is not None:
            return 1
        return max(2, math.ceil(permits.total * CONTENDED_CLAIM_SHARE))

    def _begin_claim(self, wanted: int, *, in_task: bool) -> PendingClaim:
        # Cleared before the claim, not after: a NOTIFY that lands while the claim is in
        # flight must still wake the next sleep.
        self._wakeup.clear()
        # A claim in flight proves nothing about work committed after it started.
        self.idle = False
        self.claim_rounds += 1
        claim = self._claim(wanted)
        return PendingClaim(asyncio.ensure_future(claim) if in_task else claim, wanted)

    def _claim_ahead(self) -> PendingClaim | None:
        """Start the next claim now, with the permits still free, if a full claim says more
        work is likely waiting.

        Claims of one lane run one after another (each holds the lane's lock), so the time
        between a claim's reply and the next claim's start is time the lane serves nobody.
        Starting the jobs of a batch takes time of its own; started first, the next claim's
        round trip overlaps it. Rate-limited queues claim only as their budget allows, so they
        keep to one claim at a time.
        """
        if self._rate_limit is not None:
            return None
        permits = self.permits
        if isinstance(permits, Permits) and permits.free < self._contended_least(permits):
            return None
        wanted = permits.try_reserve(self._claim_batch_size)
        return self._begin_claim(wanted, in_task=True) if wanted else None

    def _claim_aged(self) -> bool:
        """Whether this claim compares lanes by aged priority (else by static priority).

        An aged claim reads the head of every lane of the queue, which costs more than a
        static one (docs/benchmarks.md, "Priority lanes"); a job gains a step only once per
        interval, so comparing the lanes on one claim per tenth of the interval (at least once
        a second) is as good as on every claim.
        """
        aging_s = self._request.aging_s
        if aging_s <= 0:
            return False
        now = time.monotonic()
        if now < self._next_aged_claim:
            return False
        self._next_aged_claim = now + min(aging_s / 10, AGING_REFRESH_MAX_S)
        return True

    async def _claim(self, limit: int) -> list[ClaimedJob]:
        self._throttled_for_s = None
        notified, self._notified = self._notified, False
        contended, self._contended = self._contended, False
        aged = self._claim_aged()
        try:
            async with self._pool.connection() as conn:
                if self._fleet_budget is not None:
                    limited = await run_async(
                        conn,
                        claim_ready_limited(
                            self._request,
                            self._fleet_budget,
                            rows=claimed_job_rows,
                            limit=limit,
                            aged=aged,
                        ),
                    )
                    jobs, self._throttled_for_s = limited.jobs, limited.throttled_for_s
                elif (
                    contended
                    and self._turn_lane is not None
                    and self._turns_in_a_row < CONTENDED_PROBE_EVERY
                ):
                    # Still queued at the lane: a claim that only tries its lock would come back
                    # empty (a try fails while others wait), costing the server a whole claim.
                    self._turns_in_a_row += 1
                    jobs = await self._claim_in_turn(conn, limit, aged)
                    self._contended = len(jobs) == limit
                else:
                    self._turns_in_a_row = 0
                    jobs = await run_async(
                        conn,
                        claim_ready(self._request, rows=claimed_job_rows, limit=limit, aged=aged),
                    )
                    if (
                        not jobs
                        and (self._turn_lane is not None or notified)
                        and not self._request.sequential
                    ):
                        jobs = await self._claim_in_turn(conn, limit, aged)
                        self._contended = len(jobs) == limit
        except Exception:
            logger.exception("claim failed queue=%s", self.queue)
            self._turn_lane = None
            return []
        self._turn_lane = (
            (jobs[-1].priority, jobs[-1].shard)
            if jobs and len(jobs) == limit and not self._request.sequential
            else None
        )
        self.claimed_count += len(jobs)
        return jobs

    async def _claim_in_turn(
        self, conn: AsyncConnection[Any], limit: int, aged: bool
    ) -> list[ClaimedJob]:
        """Claim again after an empty claim that probably lost its lane to another claimer
        (issue #37), waiting for that lane's claim lock this time.

        A claim skips a lane whose lock another claimer holds, so in a fleet on one queue the
        claims of every process but one came back empty while the queue was full of work, and
        each such process slept until a notification or the poll interval: 100 processes
        drained slower than one. Two empty claims are most likely that: the one right after a
        full claim (a queue that drains usually gives a short claim first), which waits for
        the lane that claim took jobs from; and the one after a notification, which waits for
        whichever lane of the queue another session holds the lock of, if any. Waiting queues
        the claimers up at the lock, each woken by the commit of the one before it, at no cost
        to the server meanwhile; at most once per such claim, and at most TURN_TIMEOUT_S (a
        producer's open transaction that cancelled a job of the lane holds the lock too).
        Empty again, or timed out: the dispatcher goes idle as before.
        """
        lane, self._turn_lane = self._turn_lane, None
        try:
            return await run_async(
                conn,
                claim_ready_in_turn(
                    self._request,
                    rows=claimed_job_rows,
                    limit=limit,
                    lane=lane,
                    lock_timeout_s=TURN_TIMEOUT_S,
                    aged=aged,
                ),
            )
        except LockNotAvailable:
            logger.debug("claim lock of a lane busy past the wait queue=%s", self.queue)
            return []

    def _refresh_loop_thread_connection(self) -> None:
        # Async handlers reach the ORM through sync_to_async, on asgiref's one shared thread; its
        # Django connection gets the same expiry and health hygiene as the sync pool's: before
        # the batch after a failed attempt, otherwise at most once per
        # ORM_THREAD_CHECK_INTERVAL_S (connection ages are counted in seconds, and a thread hop
        # per claimed batch cost a no-op drain a visible share of its throughput, see
        # docs/benchmarks.md). Started, not awaited,
        # so the batch's handlers start without waiting for the hop: tasks take their first
        # step in creation order (eagerly or not, as they are all started by start_task), and
        # this one's first step queues the check on that (FIFO) thread ahead of any ORM call
        # the batch's handlers make.
        now = time.monotonic()
        if now < self._next_orm_thread_check:
            return
        self._next_orm_thread_check = now + ORM_THREAD_CHECK_INTERVAL_S
        task = start_task(sync_to_async(close_old_connections)())
        self._housekeeping.add(task)
        task.add_done_callback(self._housekeeping_done)

    def _housekeeping_done(self, task: asyncio.Task[None]) -> None:
        self._housekeeping.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            logger.error("connection check of the handlers' ORM thread failed", exc_info=exc)

    def _start(
        self,
        job: ClaimedJob,
        handler: DeclaredJob[Any, Any] | None,
        loop: asyncio.AbstractEventLoop,
        started: float,
    ) -> None:
        deadline = (
            AttemptDeadline(self._deadline_s, queue=job.queue) if self._deadline_s > 0 else None
        )
        hub = self._callbacks
        ctx = context_for(
            job,
            claimed_by=self._request.claimed_by,
            callbacks=None
            if hub is None
            else AttemptCallbacks(hub, job.job_id, job.run_lease, deadline),
        )
        attempt = ExecutingAttempt(
            job=job, handler=handler, ctx=ctx, started=started, deadline=deadline
        )
        # Registered before the task exists: an eager first step may run the job to its end.
        self._running.add(attempt)
        attempt.task = start_task(self._run_one(attempt), name=f"awa-job-{job.job_id}", loop=loop)

    async def _run_one(self, attempt: ExecutingAttempt) -> None:
        job, ctx = attempt.job, attempt.ctx
        self._job_log.started(job)
        started = time.monotonic()
        # Read once when the handler returns, for the job log and the telemetry both.
        duration_s: float | None = None
        try:
            with self._telemetry.job_span(job) as span:
                result = await execute(job, attempt.handler, ctx, self._threads, attempt.deadline)
                # Nothing more to look at when the handler returned (nearly every attempt).
                if result.outcome is not None:
                    if isinstance(result.outcome, WaitForCallback) and self._callbacks is not None:
                        refused = await self._callbacks.park(job, result.outcome)
                        if refused is None:
                            # Parked (or already resolved): the attempt stays open in storage
                            # without this worker, whose slot is freed below.
                            return
                        result = refused
                    # Asked-for outcomes are not failures; errors (terminal ones too) are.
                    if result.outcome is not None and not isinstance(
                        result.outcome, Snooze | Cancel | RetryAfter
                    ):
                        span.failed(result.outcome)
                        # The error may have broken the ORM thread's connection: check it
                        # before the next batch instead of a second later, so a retry does not
                        # meet it.
                        self._next_orm_thread_check = 0.0
            duration_s = time.monotonic() - started
            if result.outcome is None:
                completion = completed(job, result)
            else:
                progress, checkpoint, changed = ctx.state.take_unflushed()
                completion = result_to_completion(
                    job,
                    result,
                    now=self._now(),
                    policy=self._policy,
                    progress=progress if changed else None,
                    checkpoint=checkpoint if changed else None,
                )
            self._completer.submit(completion)
            self._job_log.finished(job, result.outcome, completion.outcome, duration_s)
        finally:
            # In the finally so an attempt abandoned at shutdown leaves in_flight too.
            if duration_s is None:
                duration_s = time.monotonic() - started
            self._telemetry.finished(job, duration_s=duration_s)
            self._running.discard(attempt)
            self.permits.release()
            if not self._running:
                # Claim again at once rather than after the poll interval: a drained batch often
                # means more work (or, in burst mode, that the queue may now be idle).
                self._wakeup.set()
