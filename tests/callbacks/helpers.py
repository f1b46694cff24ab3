"""Shared pieces of the callback tests: settings, reading tokens and state, forcing timeouts."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from django.db import connection
from django.test import override_settings

import awa_django as awa
from awa_django.core.retry import RetryPolicy
from awa_django.maintenance.rescuer import RescueConfig, Rescuer, RescuerResult
from awa_django.storage.connections import open_pool
from tests.conftest import BackgroundWorker, wait_until
from tests.jobs import parks

SECRET = "s3cret-" + "x" * 40

FAST: dict[str, Any] = {
    "QUEUES": {"default": {"concurrency": 1}},
    "RETRY_BACKOFF_BASE_S": 0.02,
    "RETRY_JITTER": 0,
    "POLL_INTERVAL_S": 0.1,
    "PROMOTE_INTERVAL_S": 0.05,
    "LEADER_ELECTION_INTERVAL_S": 0.1,
    "RESCUE_INTERVAL_S": 0.1,
    "CALLBACK_SECRET": SECRET,
}


def scalar(sql: str, params: list[Any] | None = None) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])
        row = cursor.fetchone()
        return None if row is None else row[0]


def notes(job_id: int) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT note FROM tests_job_runs WHERE job_id = %s ORDER BY id", [job_id])
        return [note for (note,) in cursor.fetchall()]


def tokens(job_id: int) -> list[str]:
    """Every callback token the job's handlers recorded, oldest first."""
    return [n.removeprefix("token=") for n in notes(job_id) if n.startswith("token=")]


def wait_for_token(job_id: int, count: int = 1, timeout: float = 20.0) -> str:
    wait_until(lambda: len(tokens(job_id)) >= count, timeout)
    return tokens(job_id)[count - 1]


def wait_parked(job_id: int, timeout: float = 20.0) -> None:
    """Wait until the job's attempt is parked: registered, and its slot given back."""
    wait_until(
        lambda: scalar(
            "SELECT count(*) FROM awa.leases WHERE job_id = %s AND callback_parked_at IS NOT NULL",
            [job_id],
        ),
        timeout,
    )


def park_one() -> tuple[int, str]:
    """A ``parks`` job parked on its callback, and the token; the worker that parked it is
    stopped again, so nothing else touches the callback afterwards."""
    with override_settings(AWA=FAST):
        worker = BackgroundWorker().start()
        try:
            job_id = parks.enqueue()
            token = wait_for_token(job_id)
            wait_parked(job_id)
        finally:
            worker.stop()
    return job_id, token


def state(job_id: int) -> str:
    return awa.get_job(job_id).state


def wait_for_state(job_id: int, *states: str, timeout: float = 20.0) -> None:
    wait_until(lambda: state(job_id) in states, timeout)


def snapshot(job_id: int) -> tuple[Any, ...]:
    """Everything a refused callback must leave unchanged: the job as read, and its leases."""
    record = awa.get_job(job_id)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT callback_id, callback_timeout_at, callback_parked_at, callback_resumed_at, "
            "callback_payload, deadline_at FROM awa.leases WHERE job_id = %s ORDER BY run_lease",
            [job_id],
        )
        leases = cursor.fetchall()
        cursor.execute("SELECT count(*) FROM awa.done_entries WHERE job_id = %s", [job_id])
        (done,) = cursor.fetchone()
    return (record, leases, done)


def expire_callbacks() -> None:
    """Move every callback timeout into the past, as if its outside system never answered."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE awa.leases SET callback_timeout_at = now() - interval '1 second' "
            "WHERE callback_id IS NOT NULL"
        )


def promote_retries() -> None:
    """Promote every retryable job once it is due (no leader runs the promoter in these tests)."""

    def promoted() -> bool:
        scalar("SELECT awa.promote_due('retryable', 100)")
        return scalar("SELECT count(*) FROM awa.deferred_jobs WHERE state = 'retryable'") == 0

    wait_until(promoted, timeout=10)


def rescue(staleness_s: float = 3600.0, batch_size: int = 500) -> RescuerResult:
    async def main() -> RescuerResult:
        pool = await open_pool("default", max_size=2)
        try:
            rescuer = Rescuer(
                pool,
                RescueConfig(interval_s=1, staleness_s=staleness_s, batch_size=batch_size),
                policy=RetryPolicy(base_s=0.01, max_s=1, jitter=0, unknown_kind_timeout_s=3600),
                now=lambda: datetime.now(UTC),
            )
            return await rescuer.run_once()
        finally:
            await pool.close()

    return asyncio.run(main())
