"""Migration 0030_step_costs reverses and applies again: back at 0029 the steps and edges have
their foreign keys (a workflow's deletion cascades to them), the steps' table no fillfactor and
the close passes no workflow ids on (a worker's "wf_id" is ignored); forward again none of
these, the prune deletes the steps and edges itself, and the schema is a fresh install's
either way round."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

import awa_django as awa
from awa_django.testing import run_jobs
from tests.migrations.catalog import schema_catalog
from tests.workflows.jobs import add


def catalog() -> list[str]:
    with connection.cursor() as cursor:
        return schema_catalog(cursor)


def workflow_keys_and_options() -> tuple[list[str], list[str]]:
    """The foreign keys of the workflow tables, and the steps' table's storage options."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conname FROM pg_constraint WHERE contype = 'f' AND conrelid IN "
            "('awa.workflow_steps'::regclass, 'awa.workflow_edges'::regclass) ORDER BY 1"
        )
        keys = [name for (name,) in cursor.fetchall()]
        cursor.execute("SELECT reloptions FROM pg_class WHERE oid = 'awa.workflow_steps'::regclass")
        options = cursor.fetchone()[0] or []
    return keys, list(options)


def close_passes_workflow_ids() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT prosrc FROM pg_proc WHERE oid = 'awa.close_batch'::regproc")
        return "wf_id" in str(cursor.fetchone()[0])


def pruned_rows(workflow_id: int) -> int:
    """Prunes every finished workflow; returns the rows of ``workflow_id`` left behind."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE awa.workflows SET finished_at = now() - interval '1 day'")
        cursor.execute("SELECT awa.workflow_prune(1, 1, 100)")
        cursor.execute(
            "SELECT (SELECT count(*) FROM awa.workflow_steps WHERE workflow_id = %(id)s) "
            "+ (SELECT count(*) FROM awa.workflow_edges WHERE workflow_id = %(id)s)",
            {"id": workflow_id},
        )
        return int(cursor.fetchone()[0])


@pytest.mark.usefixtures("awa_db")
def test_0030_reverses_to_0029_and_applies_again():
    installed = catalog()
    assert workflow_keys_and_options() == ([], ["fillfactor=50"])
    assert close_passes_workflow_ids()

    call_command("migrate", "awa_django", "0029_admin_scale", verbosity=0)
    assert workflow_keys_and_options() == (
        ["workflow_edges_workflow_id_to_step_fkey", "workflow_steps_workflow_id_fkey"],
        [],
    )
    assert not close_passes_workflow_ids()
    old = awa.chain(awa.call(add, x=1), awa.call(add, x=2)).enqueue()
    run_jobs()
    assert awa.get_workflow(old.workflow_id).state == "completed"
    assert pruned_rows(old.workflow_id) == 0

    call_command("migrate", "awa_django", verbosity=0)
    assert catalog() == installed
    new = awa.chain(awa.call(add, x=1), awa.call(add, x=2)).enqueue()
    run_jobs()
    assert awa.get_workflow(new.workflow_id).state == "completed"
    assert pruned_rows(new.workflow_id) == 0
