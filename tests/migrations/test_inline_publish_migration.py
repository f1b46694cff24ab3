"""Migration 0018_inline_publish (#32) reverses and applies again: back at 0017 the enqueue that
publishes in its own statement is gone and a transaction's jobs are published at its commit as
before; forward again the schema is a fresh install's and an autocommit enqueue publishes in its
statement."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection, transaction

import awa_django as awa
from tests.jobs import noop
from tests.migrations.catalog import schema_catalog


def catalog() -> list[str]:
    with connection.cursor() as cursor:
        return schema_catalog(cursor)


def announces(job_id: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT announce FROM awa.ready_entries WHERE job_id = %s", [job_id])
        return bool(cursor.fetchone()[0])


@pytest.mark.usefixtures("awa_db")
def test_0018_reverses_to_0017_and_applies_again():
    installed = catalog()
    assert any(entry.startswith("function:awa.enqueue_job_alone(") for entry in installed)

    call_command("migrate", "awa_django", "0017_lanes", verbosity=0)
    assert not any(entry.startswith("function:awa.enqueue_job_alone(") for entry in catalog())
    with transaction.atomic():
        at_0017 = awa.enqueue(noop, args={"n": 1})
    assert announces(at_0017)  # published by the commit trigger
    assert awa.get_job(at_0017).state == "available"

    call_command("migrate", "awa_django", verbosity=0)
    assert catalog() == installed
    at_0018 = awa.enqueue(noop, args={"n": 2})
    assert not announces(at_0018)  # published by its own statement
    assert awa.get_job(at_0018).state == "available"
