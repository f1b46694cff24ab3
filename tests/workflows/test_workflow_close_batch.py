"""A close batch of completed steps of one workflow does their bookkeeping together: one
update of the workflow's counters for the batch, not one per step (that made a step's close
cost several times a job's, and a wide group drain at half the rate of plain jobs). Counted in
rows the transaction updated, from PostgreSQL's statistics."""

from __future__ import annotations

import asyncio

import pytest
from psycopg import AsyncConnection

import awa_django as awa
from awa_django.core.claimed_job import claimed_job_rows
from awa_django.core.completion import Completion
from awa_django.core.outcome import Outcome
from awa_django.storage.connections import connect
from awa_django.storage.execution import close_attempts
from awa_django.storage.queue import ClaimRequest, claim_ready
from awa_django.storage.statement import run_async
from tests.jobs import noop

pytestmark = pytest.mark.usefixtures("awa_db")

BATCH = 10


async def updates_closing_one_batch() -> dict[str, int]:
    """Rows updated per awa table by the close of one batch of BATCH completed steps."""
    request = ClaimRequest(queue="default", claimed_by="test", deadline_s=0)
    conn = await connect("default")
    async with conn, conn.transaction():
        jobs = await run_async(conn, claim_ready(request, rows=claimed_job_rows, limit=BATCH))
        assert len(jobs) == BATCH
        closed = await run_async(
            conn, close_attempts([Completion.of(job, Outcome.COMPLETED) for job in jobs])
        )
        assert len(closed) == BATCH
        cursor = await conn.execute(
            "SELECT relname, n_tup_upd FROM pg_stat_xact_user_tables "
            "WHERE schemaname = 'awa' AND relname IN ('workflows', 'workflow_steps')"
        )
        rows = await cursor.fetchall()
    return {name: int(count) for name, count in rows}


def test_a_batch_of_completed_steps_updates_its_workflow_once():
    started = awa.chord([awa.call(noop, n=n) for n in range(BATCH)], noop).enqueue()
    updated = asyncio.run(updates_closing_one_batch())
    assert updated["workflows"] == 1, updated  # the counters, once for the batch
    # Each step's own row; the callback's count of what it waits for, once; its release.
    assert updated["workflow_steps"] == BATCH + 2, updated
    workflow = awa.get_workflow(started.workflow_id)
    assert workflow.counts == {"completed": BATCH, "released": 1}
    assert workflow.state == "running"


async def close_batches(conn: AsyncConnection, batches: int) -> None:
    """Claims and closes ``batches`` batches of BATCH completed steps, each batch in its own
    transaction, as a worker does."""
    request = ClaimRequest(queue="default", claimed_by="test", deadline_s=0)
    for _ in range(batches):
        async with conn.transaction():
            jobs = await run_async(conn, claim_ready(request, rows=claimed_job_rows, limit=BATCH))
            assert len(jobs) == BATCH
            await run_async(
                conn, close_attempts([Completion.of(job, Outcome.COMPLETED) for job in jobs])
            )


async def table_counts_closing_one_batch() -> dict[str, dict[str, int]]:
    """Per awa workflow table, the index scans the close of one batch of BATCH completed steps
    made."""
    conn = await connect("default")
    async with conn:
        await close_batches(conn, 1)
        # This connection's counts, not yet reported to the shared statistics: its one batch.
        cursor = await conn.execute(
            "SELECT relname, coalesce(idx_scan, 0) FROM pg_stat_xact_user_tables "
            "WHERE schemaname = 'awa' "
            "AND relname IN ('workflows', 'workflow_steps', 'workflow_edges')"
        )
        return {name: {"index_scans": int(scans)} for name, scans in await cursor.fetchall()}


async def step_updates_closing(batches: int) -> tuple[int, int]:
    """The updates of awa.workflow_steps rows, all and HOT, that closing ``batches`` batches
    made, from the shared statistics."""
    conn = await connect("default")

    async def reported() -> tuple[int, int]:
        # The flush happens once the statement has run, as the connection goes idle.
        await conn.execute("SELECT pg_stat_force_next_flush()")
        cursor = await conn.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
            "WHERE relid = 'awa.workflow_steps'::regclass"
        )
        updated, hot = await cursor.fetchone()  # type: ignore[misc]
        return int(updated), int(hot)

    async with conn:
        updated_before, hot_before = await reported()
        await close_batches(conn, batches)
        updated_after, hot_after = await reported()
    return updated_after - updated_before, hot_after - hot_before


def test_a_batch_of_group_steps_reads_its_workflow_and_edges_once_per_batch():
    started = awa.group(*(awa.call(noop, n=n) for n in range(BATCH))).enqueue()
    counts = asyncio.run(table_counts_closing_one_batch())
    # Whether the workflow was cancelled is read once for the batch, not once per step, and a
    # workflow without edges (a group) has its steps' dependents looked up not at all: one
    # probe of the edges for the batch. The counters' update and the workflow's finish (its
    # last steps were in this batch) are its other scans.
    assert counts["workflows"]["index_scans"] == 3, counts
    assert counts["workflow_edges"]["index_scans"] == 1, counts
    # Each step's row is found once, by its update: the worker sent its workflow's id, so no
    # lookup precedes the lock. The other scan is the search for an on_failure step.
    assert counts["workflow_steps"]["index_scans"] == BATCH + 1, counts
    assert awa.get_workflow(started.workflow_id).state == "completed"


def test_the_steps_rows_are_updated_in_place_as_they_end():
    # Enough steps to fill several pages of awa.workflow_steps: on a page filled up at the
    # enqueue, the new version of a step's row went to another page and into every index.
    batches = 40
    started = awa.group(*(awa.call(noop, n=n) for n in range(batches * BATCH))).enqueue()
    updated, hot = asyncio.run(step_updates_closing(batches))
    assert (updated, hot) == (batches * BATCH, batches * BATCH)
    assert awa.get_workflow(started.workflow_id).state == "completed"
