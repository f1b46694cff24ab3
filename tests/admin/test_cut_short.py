"""A bulk action the admin statement timeout stops midway (issue #36): the batches committed
before it stay done, and Django's admin log says how many, and that the rest was not done."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest
from django.conf import settings
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.db import connection
from django.test.utils import override_settings
from django.urls import reverse

import awa_django as awa
from awa_django.admin import jobs
from awa_django.ops import dlq
from tests.admin.test_dlq import insert_entries
from tests.conftest import subprocess_database_url

JOBS_MATCHING = "admin:awa_django_job_act_matching"
DLQ_MATCHING = "admin:awa_django_deadletter_act_matching"
# Long enough never to cancel a statement that is not blocked; a blocked one waits for longer.
TIMEOUT_MS = 300
# The blocked statement ends after this in any case, so the test ends on today's code too.
GUARD_S = 10


def timed_out(client, url: str, data: dict[str, str]):
    with override_settings(AWA={**settings.AWA, "ADMIN_STATEMENT_TIMEOUT_MS": TIMEOUT_MS}):
        return client.post(url, data)


@pytest.fixture
def row_lock(awa_db: None) -> Iterator[psycopg.Connection]:
    """Another session, to hold a row lock for the length of a test."""
    holder = psycopg.connect(subprocess_database_url())
    guard = threading.Timer(GUARD_S, holder.rollback)
    guard.start()
    try:
        yield holder
    finally:
        guard.cancel()
        holder.rollback()
        holder.close()


def test_cancel_all_matching_cut_short_logs_the_batches_it_cancelled(
    operator_client, monkeypatch, row_lock
):
    monkeypatch.setattr(jobs, "BULK_BATCH_SIZE", 2)
    ids = sorted(
        awa.enqueue("tests.noop", args={"n": n}, run_at=timedelta(hours=1)) for n in range(3)
    )
    # The walk goes from the newest id down, a batch of two per transaction; the oldest job's
    # row is held by another session, so the second batch's cancel waits on the lock until
    # the statement timeout cancels it (and undoes that batch only).
    row_lock.execute("SELECT 1 FROM awa.deferred_jobs WHERE job_id = %s FOR UPDATE", [ids[0]])

    response = timed_out(
        operator_client,
        reverse(JOBS_MATCHING),
        {"action": "cancel", "state": "scheduled", "confirmed": "on"},
    )

    assert response.status_code == 503
    assert [job.state for job in awa.get_jobs(ids)] == ["scheduled", "cancelled", "cancelled"]
    (entry,) = LogEntry.objects.all()
    assert entry.action_flag == CHANGE and entry.object_id is None
    assert entry.object_repr == "jobs matching state=scheduled"
    assert entry.change_message.startswith("Cancelled 2 jobs matching state=scheduled.")
    assert "Cut short by the statement timeout" in entry.change_message


@pytest.fixture
def dlq_delete_blocks() -> Iterator[None]:
    """A trigger that holds the delete of one marked DLQ entry for GUARD_S (so past the
    timeout): the purge of the batch holding it runs past the statement timeout."""
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE public.slow_dlq_delete (job_id bigint PRIMARY KEY);"
            "CREATE FUNCTION public.slow_dlq_delete() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN"
            "  IF EXISTS (SELECT 1 FROM public.slow_dlq_delete s WHERE s.job_id = OLD.job_id)"
            f"  THEN PERFORM pg_sleep({GUARD_S}); END IF;"
            "  RETURN OLD;"
            " END $$;"
            "CREATE TRIGGER slow_dlq_delete BEFORE DELETE ON awa.dlq_entries"
            " FOR EACH ROW EXECUTE FUNCTION public.slow_dlq_delete();"
        )
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(
                "DROP TRIGGER slow_dlq_delete ON awa.dlq_entries;"
                "DROP FUNCTION public.slow_dlq_delete();"
                "DROP TABLE public.slow_dlq_delete;"
            )


def test_purge_all_matching_cut_short_logs_the_batches_it_purged(
    operator_client, monkeypatch, dlq_delete_blocks
):
    monkeypatch.setattr(dlq, "BULK_BATCH_SIZE", 2)
    insert_entries(5)
    with connection.cursor() as cursor:
        cursor.execute("SELECT job_id FROM awa.dlq_entries ORDER BY dlq_at, job_id")
        order = [row[0] for row in cursor.fetchall()]
        # The first entry of the second batch: the first batch commits, the second is cut.
        cursor.execute("INSERT INTO public.slow_dlq_delete VALUES (%s)", [order[2]])

    response = timed_out(
        operator_client,
        reverse(DLQ_MATCHING),
        {"action": "purge", "queue": "default", "confirmed": "on"},
    )

    assert response.status_code == 503
    assert [awa.dlq.get(job_id) is None for job_id in order] == [True, True, False, False, False]
    (entry,) = LogEntry.objects.all()
    assert entry.action_flag == DELETION
    assert entry.object_repr == "dead-letter jobs matching queue=default"
    assert entry.change_message.startswith("Purged 2 matching queue=default.")
    assert "Cut short by the statement timeout" in entry.change_message


def test_a_bulk_action_that_finishes_logs_no_cut_short(operator_client):
    insert_entries(3)
    operator_client.post(
        reverse(DLQ_MATCHING), {"action": "purge", "queue": "default", "confirmed": "on"}
    )
    (entry,) = LogEntry.objects.all()
    assert "Cut short" not in entry.change_message
