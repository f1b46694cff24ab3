"""Helpers for the test suites of projects that use awa_django (docs/testing.md).

Everything here works on the connection of ``AWA["DATABASE_ALIAS"]``, so inside Django's
``TestCase`` (one transaction per test) the jobs a test enqueued are visible and ``run_jobs``
runs them in that transaction, through the worker's own claim and close statements. Under
``TransactionTestCase`` the same calls autocommit, and ``BackgroundWorker`` runs a real worker
on a thread. The pytest fixtures built on these live in ``awa_django.pytest_plugin``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final, ParamSpec, TypeVar, cast

from asgiref.sync import async_to_sync
from django.db import connections
from django.utils import timezone

from awa_django.conf import get_settings
from awa_django.core.outcome import Outcome
from awa_django.declarations.discovery import ensure_jobs_discovered
from awa_django.declarations.jobs import DeclaredJob, JobContext, registry
from awa_django.job_record import JobRecord
from awa_django.storage import eager as eager_storage
from awa_django.storage.browse import JobFilter, list_jobs
from awa_django.storage.control import reset_all
from awa_django.storage.jobs import jobs_by_id
from awa_django.storage.statement import run, run_read
from awa_django.worker.in_process import InProcessRunner, RanJob
from awa_django.worker.process import RunSummary, WorkerProcess, config_from_settings

P = ParamSpec("P")
R = TypeVar("R")

# States of a job that is still waiting to run.
WAITING_STATES: Final = ("available", "scheduled", "retryable")
_PAGE_SIZE: Final = 1000

__all__ = [
    "WAITING_STATES",
    "BackgroundWorker",
    "JobsRun",
    "RanJob",
    "advance_clock",
    "assert_enqueued",
    "assert_not_enqueued",
    "enqueued_jobs",
    "make_due",
    "perform",
    "reset_queue",
    "run_jobs",
    "work_one",
]


def reset_queue() -> None:
    """Delete every job, attempt and history row in the awa schema and reset its rings.

    For tests that commit (``TransactionTestCase``, ``transactional_db``), whose writes the
    test runner's rollback does not undo. Never call it against a database you care about.
    """
    with connections[get_settings().DATABASE_ALIAS].cursor() as cursor:
        run(cursor, reset_all())


@dataclass(frozen=True, slots=True)
class JobsRun:
    """What ``run_jobs`` did: every attempt it ran, in order, and counts by outcome."""

    jobs: list[RanJob] = field(default_factory=list)

    def _count(self, outcome: Outcome) -> int:
        return sum(1 for job in self.jobs if job.outcome is outcome)

    @property
    def completed(self) -> int:
        return self._count(Outcome.COMPLETED)

    @property
    def retried(self) -> int:
        return self._count(Outcome.RETRYABLE)

    @property
    def failed(self) -> int:
        return self._count(Outcome.FAILED)

    @property
    def snoozed(self) -> int:
        return self._count(Outcome.SNOOZED)

    @property
    def cancelled(self) -> int:
        return self._count(Outcome.CANCELLED)

    def __len__(self) -> int:
        return len(self.jobs)


def _kind(fn_or_kind: str | DeclaredJob[Any, Any]) -> str:
    return fn_or_kind.kind if isinstance(fn_or_kind, DeclaredJob) else fn_or_kind


def run_jobs(
    queue: str | None = None,
    kinds: Iterable[str | DeclaredJob[Any, Any]] | None = None,
    max_jobs: int | None = None,
) -> JobsRun:
    """Run every due job in this thread, the way a worker would, until none is left.

    Due scheduled and retryable jobs are promoted first, then ready jobs are claimed, run and
    closed with the worker's statements and outcome mapping, so retries, snoozes, cancels and
    failures end up stored exactly as a worker would store them. A retry is due only after its
    backoff: use ``advance_clock`` or ``make_due`` to run it without sleeping. ``queue`` limits
    the run to one queue (default: every queue in ``AWA["QUEUES"]``); ``kinds`` to jobs of
    these kinds (a queue whose next job is of another kind is left alone: jobs are claimed in
    queue order, never skipped); ``max_jobs`` caps the attempts run.
    """
    ensure_jobs_discovered()
    queues = [queue] if queue is not None else list(get_settings().QUEUES)
    wanted = None if kinds is None else {_kind(k) for k in kinds}
    return JobsRun(InProcessRunner().drain(queues, kinds=wanted, max_jobs=max_jobs))


def work_one(job_id: int) -> RanJob:
    """Run one stored job now (made due first if it is scheduled or retrying) and close it.

    The job must be the next one its queue would hand out; otherwise this raises
    ``AssertionError`` naming the job ahead of it (``run_jobs`` runs them all in order).
    """
    ensure_jobs_discovered()
    runner = InProcessRunner()
    with connections[runner.alias].cursor() as cursor:
        found = run(cursor, jobs_by_id([job_id]))
    record = found[0] if found else None
    if record is None or record.state not in WAITING_STATES:
        raise AssertionError(
            f"job {job_id} is not waiting to run ({record.state if record else 'no such job'})"
        )
    if record.state != "available":
        runner.make_due([job_id])
        runner.promote()
    head = runner.next_ready(record.queue)
    if head is None or head.job_id != job_id:
        raise AssertionError(
            f"job {job_id} is not next in queue {record.queue!r}: job "
            f"{head.job_id if head else None} is ahead of it; use run_jobs()"
        )
    claimed = runner.claim(record.queue, 1)
    if not claimed:
        raise AssertionError(f"job {job_id} could not be claimed (its lane is busy or paused)")
    ran = runner.work(claimed[0])
    runner.report()
    if ran.job_id != job_id:
        # Priority aging can put another lane's job first; it was claimed, so it ran.
        raise AssertionError(f"the claim took job {ran.job_id} (now {ran.outcome}), not {job_id}")
    return ran


def perform(fn: DeclaredJob[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Call a job's handler directly with a real ``JobContext`` for a first attempt, after
    validating the arguments as ``enqueue`` would; nothing is stored, exceptions propagate."""
    if args:
        raise TypeError(f"perform({fn.kind}, ...) takes keyword arguments only")
    bound = fn.bind(kwargs).args
    conf = get_settings()
    ctx = JobContext(
        job_id=0,
        kind=fn.kind,
        queue=fn.queue or conf.DEFAULT_QUEUE,
        priority=fn.priority or conf.DEFAULT_PRIORITY,
        attempt=1,
        max_attempts=fn.max_attempts or conf.DEFAULT_MAX_ATTEMPTS,
        run_lease=1,
        args=bound,
        metadata={},
        tags=(),
        created_at=timezone.now(),
    )
    # The arguments were checked by bind; P cannot express a dict of them.
    func = cast(Callable[..., Any], fn.func)
    if fn.is_async:
        return cast(R, async_to_sync(func)(ctx, **bound))
    return cast(R, func(ctx, **bound))


def _matches(record: JobRecord, args: Mapping[str, Any] | None) -> bool:
    return args is None or all(k in record.args and record.args[k] == v for k, v in args.items())


def enqueued_jobs(
    fn_or_kind: str | DeclaredJob[Any, Any] | None = None,
    *,
    args: Mapping[str, Any] | None = None,
    queue: str | None = None,
    states: Sequence[str] = WAITING_STATES,
) -> list[JobRecord]:
    """Jobs waiting to run (or in ``states``), oldest first, filtered by kind, by ``args``
    (every given argument equal, others ignored) and by queue."""
    kind = None if fn_or_kind is None else _kind(fn_or_kind)
    found: list[JobRecord] = []
    with connections[get_settings().DATABASE_ALIAS].cursor() as cursor:
        for state in states:
            where = JobFilter(queue=queue, kind=kind, state=state, exact=True)
            before: int | None = None
            while True:  # the operators' newest-first pages, all of them
                page = run_read(cursor, list_jobs(where=where, before=before, limit=_PAGE_SIZE))
                found += page.jobs
                if page.next_before is None:
                    break
                before = page.next_before
    found.sort(key=lambda record: record.job_id)
    return [record for record in found if _matches(record, args)]


def _describe(records: Sequence[JobRecord]) -> str:
    if not records:
        return "none"
    return "; ".join(f"#{r.job_id} {r.kind} {r.state} queue={r.queue} {r.args}" for r in records)


def assert_enqueued(
    fn_or_kind: str | DeclaredJob[Any, Any],
    *,
    args: Mapping[str, Any] | None = None,
    queue: str | None = None,
    count: int | None = None,
) -> list[JobRecord]:
    """Fail unless jobs like this wait to run (exactly ``count`` of them, when given; at
    least one otherwise); returns them."""
    found = enqueued_jobs(fn_or_kind, args=args, queue=queue)
    if (count is None and not found) or (count is not None and len(found) != count):
        waiting = enqueued_jobs()
        raise AssertionError(
            f"expected {'some' if count is None else count} {_kind(fn_or_kind)} job(s)"
            f"{f' with args {dict(args)}' if args is not None else ''}"
            f"{f' on queue {queue!r}' if queue else ''}, found {len(found)}; "
            f"waiting jobs: {_describe(waiting)}"
        )
    return found


def assert_not_enqueued(
    fn_or_kind: str | DeclaredJob[Any, Any] | None = None,
    *,
    args: Mapping[str, Any] | None = None,
    queue: str | None = None,
) -> None:
    """Fail if any job like this waits to run (any job at all when nothing is given)."""
    found = enqueued_jobs(fn_or_kind, args=args, queue=queue)
    if found:
        raise AssertionError(f"expected no such job waiting, found: {_describe(found)}")


def advance_clock(by: float | timedelta) -> int:
    """Act as if ``by`` (seconds or a timedelta) passed for scheduled and retrying jobs: their
    ``run_at`` moves that much earlier in the database, so those now due are run by the next
    ``run_jobs`` (or promoted by a worker). Returns how many jobs moved. Only the test database
    changes: nothing in awa's code reads a fake clock."""
    seconds = by.total_seconds() if isinstance(by, timedelta) else float(by)
    with connections[get_settings().DATABASE_ALIAS].cursor() as cursor:
        return run(cursor, eager_storage.shift_deferred(seconds=seconds))


def make_due(job_ids: Sequence[int] | None = None) -> int:
    """Make these scheduled or retrying jobs (every one when None) due now; returns how many
    moved."""
    with connections[get_settings().DATABASE_ALIAS].cursor() as cursor:
        return run(cursor, eager_storage.make_due(job_ids=job_ids))


class BackgroundWorker:
    """A real, non-burst worker (a ``WorkerProcess``) on its own thread and event loop, for
    end-to-end tests with committed data (``TransactionTestCase``); ``stop`` drains it like a
    SIGTERM. ``runtime`` is that ``WorkerProcess`` once started."""

    def __init__(self, **config_overrides: Any) -> None:
        self.config = config_from_settings(get_settings(), **config_overrides)
        self.runtime: WorkerProcess | None = None
        self.summary: RunSummary | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True, name="awa-test-worker")

    def _main(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self.runtime = WorkerProcess(self.config, registry.get)
            ready_task = asyncio.create_task(self.runtime.ready.wait())
            ready_task.add_done_callback(lambda _: self._started.set())
            self.summary = await self.runtime.run()

        try:
            asyncio.run(main())
        finally:
            self._started.set()
            connections.close_all()

    def start(self, timeout: float = 30.0) -> BackgroundWorker:
        ensure_jobs_discovered()
        self._thread.start()
        if not self._started.wait(timeout) or self.runtime is None or self._thread_failed():
            raise AssertionError("awa worker thread did not become ready")
        return self

    def _thread_failed(self) -> bool:
        return not self._thread.is_alive() and self.summary is None

    def stop(self, timeout: float = 60.0) -> RunSummary:
        if self._loop is not None and self.runtime is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self.runtime.request_stop)
        self._thread.join(timeout)
        if self._thread.is_alive() or self.summary is None:
            raise AssertionError("awa worker thread did not stop cleanly")
        return self.summary
