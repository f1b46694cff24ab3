"""The substrate migration applies forwards, backwards to zero, and forwards again."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

import awa_django as awa
from tests.migrations.catalog import schema_catalog


def catalog() -> list[str]:
    with connection.cursor() as cursor:
        return schema_catalog(cursor)


@pytest.mark.usefixtures("awa_db", "storage_kinds")
def test_migrate_forward_zero_and_forward_again(capsys):
    installed = catalog()
    assert "p:ready_entries" in installed and "r:ready_entries_3" in installed
    assert "r:ready_entries_4" not in installed
    assert "v:jobs" in installed
    assert any(entry.startswith("function:awa.claim_ready(") for entry in installed)

    call_command("migrate", "awa_django", "zero", verbosity=0)
    assert catalog() == []
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'awa'")
        assert cursor.fetchone() == (0,)

    call_command("migrate", "awa_django", verbosity=0)
    assert catalog() == installed
    job_id = awa.enqueue("k.after_remigrate", args={})
    assert awa.get_job(job_id).state == "available"


@pytest.mark.django_db
def test_sqlmigrate_shows_the_substrate_sql(capsys):
    call_command("sqlmigrate", "awa_django", "0001")
    assert "CREATE OR REPLACE FUNCTION awa.claim_ready" in capsys.readouterr().out
