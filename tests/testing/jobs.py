"""Handlers for the testing-helper and eager-mode tests; runs are logged to ``tests_job_runs``."""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.db import connection

import awa_django as awa
from awa_django.declarations.jobs import JobContext
from tests.jobs import record_run


@awa.job(kind="dx.greet")
def greet(ctx: JobContext, name: str, times: int = 1) -> str:
    record_run(ctx, f"hello {name} x{times} in_atomic={connection.in_atomic_block}")
    return f"hello {name}"


@awa.job(kind="dx.greet_async")
async def greet_async(ctx: JobContext, name: str) -> str:
    await sync_to_async(record_run)(ctx, f"async hello {name}")
    return f"async hello {name}"


@awa.job(kind="dx.flaky", max_attempts=3)
def flaky(ctx: JobContext, succeed_on: int = 2) -> None:
    record_run(ctx, f"flaky attempt {ctx.attempt}")
    if ctx.attempt < succeed_on:
        raise ConnectionError(f"flaky on attempt {ctx.attempt}")


@awa.job(kind="dx.broken_sql", max_attempts=2)
def broken_sql(ctx: JobContext) -> None:
    record_run(ctx, "before the bad statement")
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM no_such_table_dx")


@awa.job(kind="dx.cancels_itself")
def cancels_itself(ctx: JobContext) -> None:
    # The operator's cancel closes the running attempt first; this attempt's own completion
    # must then be refused by the run_lease guard.
    awa.cancel(ctx.job_id, reason="withdrawn while running")
