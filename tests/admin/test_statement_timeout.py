"""Admin statements run under AWA['ADMIN_STATEMENT_TIMEOUT_MS'] (issue #36): a page or action
whose statement runs past it is cancelled by PostgreSQL, the operator reads why (503, not a
500), nothing of it is left running, and the connection's own setting is put back."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.http import HttpResponse
from django.test import Client
from django.test.utils import override_settings
from django.urls import reverse

import awa_django as awa
from tests.conftest import subprocess_database_url

LIST = "admin:awa_django_job_changelist"
MATCHING = "admin:awa_django_job_act_matching"
HEALTH = "admin:awa_django_queue_changelist"
HEALTH_ACT = "admin:awa_django_queue_act"
WORKERS = "admin:awa_django_runtimeinstance_changelist"
DLQ_LIST = "admin:awa_django_deadletter_changelist"
DLQ_GROUPS = "admin:awa_django_deadletter_groups"
DLQ_MATCHING = "admin:awa_django_deadletter_act_matching"
# Long enough to never cancel a statement that is not blocked; a blocked one waits forever.
TIMEOUT_MS = 300
# The lock is released after this in any case, so the test ends on today's code too (the page
# then answers 200 and the test fails on its status, not by hanging).
GUARD_S = 10


def locked(table: str) -> Iterator[psycopg.Connection]:
    """Another session holding ``table`` exclusively: every statement reading it waits until
    that session ends, as behind a pathological plan it would run on."""
    holder = psycopg.connect(subprocess_database_url())
    holder.execute(f"LOCK TABLE awa.{table} IN ACCESS EXCLUSIVE MODE")
    guard = threading.Timer(GUARD_S, holder.rollback)
    guard.start()
    try:
        yield holder
    finally:
        guard.cancel()
        holder.rollback()
        holder.close()


@pytest.fixture
def claims_locked(awa_db: None) -> Iterator[psycopg.Connection]:
    yield from locked("claim_receipts")


@pytest.fixture
def dlq_locked(awa_db: None) -> Iterator[psycopg.Connection]:
    yield from locked("dlq_entries")


def blocked_statements() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        (count,) = cursor.fetchone()
    return int(count)


def statement_timeout() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        (value,) = cursor.fetchone()
    return str(value)


def assert_cancelled_and_explained(
    response: HttpResponse, holder: psycopg.Connection, own: str
) -> None:
    # Answered while the lock is still held: the statement was cancelled, not finished.
    assert holder.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    assert response.status_code == 503
    assert b'id="statement-timeout"' in response.content
    assert f"{TIMEOUT_MS} ms".encode() in response.content
    assert blocked_statements() == 0
    assert statement_timeout() == own


def bounded_request(client: Client, method: str, url_name: str, data: dict[str, str]) -> Any:
    with override_settings(AWA={**settings.AWA, "ADMIN_STATEMENT_TIMEOUT_MS": TIMEOUT_MS}):
        return getattr(client, method)(reverse(url_name), data)


@pytest.mark.parametrize(
    ("method", "url_name", "data"),
    [
        ("get", LIST, {"state": "running"}),
        ("post", MATCHING, {"action": "cancel", "state": "running"}),
        ("post", MATCHING, {"action": "cancel", "state": "running", "confirmed": "on"}),
        ("get", HEALTH, {"live": "1"}),
        ("post", HEALTH_ACT, {"action": "drain", "queue": "default"}),
        ("get", WORKERS, {}),
    ],
    ids=["list", "count", "bulk-walk", "count-now", "drain-count", "workers"],
)
def test_a_statement_past_the_timeout_is_cancelled_and_explained(
    operator_client, claims_locked, method, url_name, data
):
    awa.enqueue("tests.noop", args={}, queue="default")  # a queue the drain form knows
    own = statement_timeout()
    response = bounded_request(operator_client, method, url_name, data)
    assert_cancelled_and_explained(response, claims_locked, own)


@pytest.mark.parametrize(
    ("method", "url_name", "data"),
    [
        ("get", DLQ_LIST, {}),
        ("get", DLQ_GROUPS, {}),
        ("post", DLQ_MATCHING, {"action": "retry", "reason": "attempts_exhausted"}),
        (
            "post",
            DLQ_MATCHING,
            {"action": "retry", "reason": "attempts_exhausted", "confirmed": "on"},
        ),
    ],
    ids=["list", "groups", "count", "bulk-walk"],
)
def test_a_dlq_statement_past_the_timeout_is_cancelled_and_explained(
    operator_client, dlq_locked, method, url_name, data
):
    own = statement_timeout()
    response = bounded_request(operator_client, method, url_name, data)
    assert_cancelled_and_explained(response, dlq_locked, own)


def test_pages_within_the_timeout_answer_as_before(operator_client):
    job_id = awa.enqueue("tests.noop", args={})
    own = statement_timeout()
    with override_settings(AWA={**settings.AWA, "ADMIN_STATEMENT_TIMEOUT_MS": TIMEOUT_MS}):
        page = operator_client.get(reverse(LIST))
    assert page.status_code == 200
    assert f">{job_id}<".encode() in page.content
    assert statement_timeout() == own
