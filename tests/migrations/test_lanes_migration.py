"""Migration 0017_lanes (#35) reverses and applies again: back at 0016, producers of this version
still enqueue (their commits create the lanes, as before), and forward again the schema is a
fresh install's and lanes are created before the producer's transaction."""

from __future__ import annotations

import logging

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection, transaction

import awa_django as awa
from awa_django.storage.connections import connection_kwargs
from awa_django.testing import reset_queue
from tests.jobs import noop
from tests.migrations.catalog import schema_catalog


def catalog() -> list[str]:
    with connection.cursor() as cursor:
        return schema_catalog(cursor)


def lane_exists(queue: str) -> bool:
    """Whether another connection sees a lane of ``queue``."""
    with psycopg.connect(**connection_kwargs("default"), autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM awa.queue_lanes WHERE queue = %s", [queue])
        return bool(row.fetchone()[0])


def create_lane_source() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT prosrc FROM pg_proc WHERE oid = 'awa.create_lane'::regproc")
        return str(cursor.fetchone()[0])


@pytest.mark.usefixtures("awa_db")
def test_0017_reverses_to_0016_and_applies_again(caplog):
    installed = catalog()
    assert any(entry.startswith("function:awa.ensure_lanes(") for entry in installed)
    awa.enqueue(noop, args={"n": 1}, queue="default")  # a lane that exists throughout

    call_command("migrate", "awa_django", "0016_flows2", verbosity=0)
    at_0016 = catalog()
    assert not any(entry.startswith("function:awa.ensure_lanes(") for entry in at_0016)
    assert "LOCK TABLE awa.queue_lanes" in create_lane_source()
    with caplog.at_level(logging.WARNING, logger="awa_django.storage.lanes"):
        with transaction.atomic():
            old_lane = awa.enqueue(noop, args={"n": 2}, queue="email")
            assert not lane_exists("email")  # left to the commit, as 0016 did
        assert lane_exists("email")
    assert "could not create the lanes of queue 'email'" in caplog.text
    assert awa.get_job(old_lane).state == "available"

    call_command("migrate", "awa_django", verbosity=0)
    assert catalog() == installed
    assert "LOCK TABLE" not in create_lane_source()
    # What the test suite does between tests; it also ends the failed attempt's back-off.
    reset_queue()
    with transaction.atomic():
        awa.enqueue(noop, args={"n": 3}, queue="email")
        assert lane_exists("email")
