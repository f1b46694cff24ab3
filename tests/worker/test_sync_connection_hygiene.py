"""Django's connection hygiene around sync jobs (#32): what ``close_old_connections`` before and
after each job gave, kept with one check per job where there is nothing to check before it.
Jobs run one after another on one handler thread, through the worker's ``execute``, against the
real database."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import OperationalError, connection, connections

from awa_django.core.claimed_job import ClaimedJob
from awa_django.core.handler_result import HandlerResult
from awa_django.declarations.jobs import DeclaredJob, JobContext
from awa_django.worker.executor import context_for, execute
from awa_django.worker.handler_threads import HandlerThreads
from tests.conftest import close_this_threads_connection

pytestmark = pytest.mark.usefixtures("awa_db")

Handler = Callable[[JobContext], None]


def run_on_one_thread(*handlers: Handler, pause_s: float = 0.0) -> list[HandlerResult]:
    """Each handler as a sync job, in turn, on one handler thread, ``pause_s`` apart."""

    async def main() -> list[HandlerResult]:
        threads = HandlerThreads(1)
        results = []
        try:
            for job_id, handler in enumerate(handlers, start=1):
                now = datetime.now(UTC)
                job = ClaimedJob(
                    queue="default", priority=2, shard=0, lane_seq=job_id, ready_slot=0,
                    job_id=job_id, kind="tests.hygiene", args={}, attempt=1, run_lease=1,
                    max_attempts=3, run_at=now, created_at=now, metadata={}, tags=[], errors=[],
                )  # fmt: skip
                declared = DeclaredJob(
                    handler, kind=job.kind, queue=None, priority=None, max_attempts=None
                )
                results.append(await execute(job, declared, context_for(job), threads))
                await asyncio.sleep(pause_s)
        finally:
            # A connection a test kept open must not outlive the test database.
            await threads.run(close_this_threads_connection)
            threads.shutdown()
        return results

    return asyncio.run(main())


def query(ctx: JobContext) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def test_with_conn_max_age_0_a_jobs_connection_is_closed_after_it() -> None:
    seen: list[Any] = []

    def uses_the_database(ctx: JobContext) -> None:
        query(ctx)
        seen.append(connections["default"])

    results = run_on_one_thread(uses_the_database, uses_the_database)
    assert [result.outcome for result in results] == [None, None]
    assert len(seen) == 2 and all(wrapper.connection is None for wrapper in seen)


def keeps_its_connection(max_age_s: float, kept: list[Any] | None = None) -> Handler:
    """A job that queries, then keeps its connection (appended to ``kept``) as CONN_MAX_AGE =
    ``max_age_s`` would."""

    def handler(ctx: JobContext) -> None:
        query(ctx)
        connection.close_at = time.monotonic() + max_age_s
        if kept is not None:
            kept.append(connection.connection)

    return handler


def test_a_connection_kept_open_is_reused_by_the_next_job_until_it_expires() -> None:
    raw: list[Any] = []

    def records_its_connection(ctx: JobContext) -> None:
        raw.append(connection.connection)
        query(ctx)
        raw.append(connection.connection)

    kept: list[Any] = []
    run_on_one_thread(keeps_its_connection(60, kept), records_its_connection)
    # Open before the second job's handler ran: the first job's, kept.
    assert raw[0] is kept[0] is raw[1] is not None
    raw.clear()
    kept.clear()
    run_on_one_thread(keeps_its_connection(0.1, kept), records_its_connection, pause_s=0.3)
    # Expired while the thread waited: closed before the second job, which opened its own.
    assert kept[0].closed
    assert raw[0] is None and raw[1] is not None


def test_a_broken_connection_is_not_handed_to_the_next_job() -> None:
    raw: list[Any] = []

    def breaks_its_connection(ctx: JobContext) -> None:
        keeps_its_connection(60, raw)(ctx)
        with pytest.raises(OperationalError), connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")

    def records_its_connection(ctx: JobContext) -> None:
        raw.append(connection.connection)
        query(ctx)

    results = run_on_one_thread(breaks_its_connection, records_its_connection)
    assert [result.outcome for result in results] == [None, None]
    assert raw[0].closed and raw[1] is None


def test_a_job_that_leaves_no_connection_open_checks_the_connections_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each check walks Django's aliases (``connections.all``); before a job, it is needed only
    # when the job before left a connection open.
    walks: list[bool] = []
    walk = connections.all

    def counted(initialized_only: bool = False) -> list[Any]:
        walks.append(initialized_only)
        return walk(initialized_only=initialized_only)

    monkeypatch.setattr(connections, "all", counted)

    def no_op(ctx: JobContext) -> None:
        return None

    run_on_one_thread(no_op, query, no_op)
    assert len(walks) == 3

    walks.clear()
    run_on_one_thread(keeps_its_connection(60), no_op)
    # The second job's check before it finds the first job's connection, then the one after.
    assert len(walks) == 3
