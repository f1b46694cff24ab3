"""Finished workflows are reclaimed by the leader's retention once their jobs' retention has
passed; running ones, and the results their later steps need, are kept."""

from __future__ import annotations

import asyncio

import pytest
from django.db import connection

import awa_django as awa
from awa_django.maintenance.retention import RetentionCleaner, RetentionConfig
from awa_django.storage.connections import open_pool
from tests.conftest import run_burst
from tests.workflows.jobs import add, fail

pytestmark = pytest.mark.usefixtures("awa_db")


def age(workflow_id: int, days: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE awa.workflows SET finished_at = now() - make_interval(days => %s) "
            "WHERE workflow_id = %s",
            [days, workflow_id],
        )


def rows_of(workflow_id: int) -> tuple[int, int]:
    """The workflow's rows in awa.workflow_steps and awa.workflow_edges."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM awa.workflow_steps WHERE workflow_id = %(id)s), "
            "(SELECT count(*) FROM awa.workflow_edges WHERE workflow_id = %(id)s)",
            {"id": workflow_id},
        )
        steps, edges = cursor.fetchone()
    return int(steps), int(edges)


def cleanup() -> int:
    async def once() -> int:
        pool = await open_pool("default", max_size=1)
        try:
            cleaner = RetentionCleaner(
                pool,
                RetentionConfig(
                    interval_s=60,
                    dlq_retention_s=30 * 86400,
                    failed_retention_s=3 * 86400,
                    batch_size=10,
                    completed_retention_s=86400,
                ),
            )
            return (await cleaner.run_once()).workflows_deleted
        finally:
            await pool.close()

    return asyncio.run(once())


def test_finished_workflows_go_after_their_retention_and_running_ones_stay():
    done = awa.chain(awa.call(add, x=1), awa.call(add, x=2)).enqueue()
    failed = awa.chain(awa.call(fail), awa.call(add, x=2)).enqueue()
    run_burst()
    # Not run: still running when the others have long finished.
    running = awa.chain(awa.call(add, x=1), awa.call(add, x=2)).enqueue()
    age(done.workflow_id, 2)
    age(failed.workflow_id, 2)
    assert cleanup() == 1
    assert awa.get_workflow(done.workflow_id) is None
    assert rows_of(done.workflow_id) == (0, 0)  # its steps and edges with it
    assert awa.get_workflow(failed.workflow_id).state == "failed"  # kept 3 days
    assert rows_of(failed.workflow_id) == (2, 1)
    age(failed.workflow_id, 4)
    assert cleanup() == 1
    assert awa.get_workflow(failed.workflow_id) is None
    assert rows_of(failed.workflow_id) == (0, 0)
    assert awa.get_workflow(running.workflow_id) is not None
    assert rows_of(running.workflow_id) == (2, 1)
