"""``migrate awa_django zero`` refuses to drop a schema that still holds live jobs, names the
counts and changes nothing, unless AWA_ALLOW_SCHEMA_DROP=1; an empty schema, and unapplying
the later migrations only, go ahead as before."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import override_settings

import awa_django as awa
from tests.conftest import run_burst
from tests.jobs import noop, terminal
from tests.ops.helpers import manage

pytestmark = pytest.mark.usefixtures("awa_db")


def schema_exists() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'awa'")
        return cursor.fetchone() == (1,)


@pytest.fixture
def remigrate() -> Iterator[None]:
    """Whatever a test unapplies is applied again for the tests after it."""
    yield
    call_command("migrate", "awa_django", verbosity=0)


@pytest.fixture
def live_jobs() -> dict[str, int]:
    with override_settings(AWA={"QUEUES": {"default": {"dlq": True}}}):
        dead = terminal.enqueue()
        retrying = awa.enqueue("tests.always_fails", args={}, max_attempts=2)
        run_burst()
        return {
            "available": noop.enqueue(),
            "scheduled": awa.enqueue(noop, run_at=timedelta(hours=1)),
            "retryable": retrying,
            "dlq": dead,
        }


def test_migrate_zero_refuses_while_jobs_are_live(live_jobs):
    refused = manage("migrate", "awa_django", "zero", "--no-input")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "Traceback" not in refused.stderr
    assert "still holds 4 live jobs" in refused.stderr
    assert "1 available, 1 scheduled, 1 retryable, 1 in the dead-letter queue" in refused.stderr
    assert "AWA_ALLOW_SCHEMA_DROP=1" in refused.stderr
    assert "Unapplying" not in refused.stdout
    assert schema_exists()
    assert {name: awa.get_job(job_id).state for name, job_id in live_jobs.items()} == {
        name: name for name in live_jobs
    }
    with pytest.raises(CommandError, match="still holds 4 live jobs"):
        call_command("migrate", "awa_django", "zero", verbosity=0)
    assert schema_exists()


def test_the_operator_may_drop_live_jobs_with_the_environment_variable(
    live_jobs, remigrate, monkeypatch
):
    monkeypatch.setenv("AWA_ALLOW_SCHEMA_DROP", "1")
    call_command("migrate", "awa_django", "zero", verbosity=0)
    assert not schema_exists()


def test_an_empty_schema_drops_without_asking(remigrate):
    call_command("migrate", "awa_django", "zero", verbosity=0)
    assert not schema_exists()


def test_unapplying_only_the_later_migrations_keeps_the_jobs_and_goes_ahead(live_jobs, remigrate):
    call_command("migrate", "awa_django", "0001", verbosity=0)
    assert schema_exists()
    assert awa.get_job(live_jobs["available"]).state == "available"
