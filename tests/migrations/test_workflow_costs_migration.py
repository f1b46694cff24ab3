"""Migration 0023_workflow_costs reverses and applies again: back at 0021 every step is written
held and the roots are released through awa.deferred_jobs, and a wide fan-in is released with
its inputs copied into its row; forward again the roots go straight to the ready ring, a wide
fan-in reads its inputs when it runs, and the schema is a fresh install's either way round."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

import awa_django as awa
from tests.migrations.catalog import schema_catalog
from tests.workflows.jobs import add, collect


def catalog() -> list[str]:
    with connection.cursor() as cursor:
        return schema_catalog(cursor)


def has_function(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regproc(%s) IS NOT NULL", [name])
        return bool(cursor.fetchone()[0])


def deferred_rows(job_ids: list[int]) -> int:
    """How many of ``job_ids`` have a row in awa.deferred_jobs: the held steps only."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.deferred_jobs WHERE job_id = ANY(%s)", [job_ids])
        return int(cursor.fetchone()[0])


def create_source() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT prosrc FROM pg_proc WHERE oid = 'awa.workflow_create'::regproc")
        return str(cursor.fetchone()[0])


def wide_chord() -> awa.WorkflowRun:
    return awa.chord([awa.call(add, x=n) for n in range(70)], collect).enqueue()


@pytest.mark.usefixtures("awa_db")
def test_0023_reverses_to_0021_and_applies_again():
    installed = catalog()
    assert "jsonb_to_recordset" in create_source()
    assert has_function("awa.workflow_step_inputs")

    call_command("migrate", "awa_django", "0021_unsuccessful_closures", verbosity=0)
    assert "jsonb_to_recordset" not in create_source()
    assert not has_function("awa.workflow_step_inputs")
    assert not has_function("awa.workflow_inputs_copied")
    old = awa.chord([awa.call(add, x=1), awa.call(add, x=2)], collect).enqueue()
    assert awa.get_workflow(old.workflow_id).counts == {"released": 2, "held": 1}
    assert deferred_rows(list(old.job_ids.values())) == 1

    call_command("migrate", "awa_django", verbosity=0)
    assert catalog() == installed
    assert "jsonb_to_recordset" in create_source()
    new = awa.chord([awa.call(add, x=1), awa.call(add, x=2)], collect).enqueue()
    assert awa.get_workflow(new.workflow_id).counts == {"released": 2, "held": 1}
    assert deferred_rows(list(new.job_ids.values())) == 1
    wide = wide_chord()
    entry = awa.get_job(wide.job_ids["callback"]).metadata["awa:workflow"]
    assert entry["inputs_read"] is True
