"""Async handlers share one ORM connection (asgiref's thread); the worker keeps it healthy."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.test import override_settings

import awa_django as awa
from awa_django.worker import dispatcher
from tests.conftest import BackgroundWorker, wait_until
from tests.jobs import orm_thread_pid

pytestmark = pytest.mark.usefixtures("awa_db")

FAST_RETRY = {
    "QUEUES": {"default": {"concurrency": 4}, "email": {"concurrency": 2}},
    "RETRY_BACKOFF_BASE_S": 0.02,
    "RETRY_JITTER": 0,
    "POLL_INTERVAL_S": 0.1,
    "PROMOTE_INTERVAL_S": 0.05,
}


def close_connection() -> None:
    # Looked up in the calling thread: Django connections are per thread.
    connection.close()


@pytest.fixture(autouse=True)
def close_orm_thread_connection() -> Iterator[None]:
    """The handlers' connection on asgiref's thread must not outlive the test database."""
    yield
    asyncio.run(sync_to_async(close_connection)())


def notes(job_id: int) -> list[tuple[int, str]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attempt, note FROM tests_job_runs WHERE job_id = %s ORDER BY id", [job_id]
        )
        return cursor.fetchall()


@override_settings(AWA=FAST_RETRY)
def test_a_failed_attempt_gets_the_next_batch_a_checked_orm_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Only a failure may trigger the check during this test, not the periodic one.
    monkeypatch.setattr(dispatcher, "ORM_THREAD_CHECK_INTERVAL_S", 3600.0)
    worker = BackgroundWorker(queues={"default": 2}).start()
    try:
        first = orm_thread_pid.enqueue()
        wait_until(lambda: awa.get_job(first).state == "completed", timeout=10)
        [(_, pid)] = notes(first)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [int(pid)])
        second = orm_thread_pid.enqueue()
        wait_until(lambda: awa.get_job(second).state in ("completed", "failed"), timeout=10)
    finally:
        worker.stop()
    job = awa.get_job(second)
    # The first attempt met the terminated connection; the check before the retry's batch
    # closed it, so the retry reconnected.
    assert job.state == "completed", job.errors
    assert job.attempt == 2
    assert [entry["attempt"] for entry in job.errors] == [1]
    assert "Error" in job.errors[0]["type"]
    assert [attempt for attempt, _ in notes(second)] == [2]
