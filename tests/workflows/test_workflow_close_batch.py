"""A close batch of completed steps of one workflow does their bookkeeping together: one
update of the workflow's counters for the batch, not one per step (that made a step's close
cost several times a job's, and a wide group drain at half the rate of plain jobs). Counted in
rows the transaction updated, from PostgreSQL's statistics."""

from __future__ import annotations

import asyncio

import pytest

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
