"""The process root's guarantee (worker.process, worker.service): services start in order and
stop in reverse, and when one fails to start, the ones already started are stopped (their
connections closed, the runtime row withdrawn) before the error leaves the process; one that
fails to stop keeps none of the others running."""

from __future__ import annotations

import asyncio
import logging

import pytest
from django.db import connection

import awa_django as awa
from awa_django.conf import get_settings
from awa_django.declarations.jobs import registry
from awa_django.worker.heartbeat import Heartbeat
from awa_django.worker.process import WorkerProcess, config_from_settings
from tests.conftest import wait_until
from tests.jobs import record

pytestmark = pytest.mark.usefixtures("awa_db", "close_orm_thread_connection")


def service_events(caplog: pytest.LogCaptureFixture, what: str) -> list[str]:
    prefix = f"service {what} name="
    return [
        r.getMessage().removeprefix(prefix)
        for r in caplog.records
        if r.name == "awa_django.worker.service" and r.getMessage().startswith(prefix)
    ]


def awa_backends() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name IN ('awa_worker', 'awa_worker_session')"
        )
        (count,) = cursor.fetchone()
    return int(count)


def test_services_start_in_order_and_stop_in_reverse(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="awa_django.worker.service")
    record.enqueue(n=1)
    config = config_from_settings(get_settings(), queues={"default": 2}, burst=True)
    summary = asyncio.run(WorkerProcess(config, registry.get).run())

    assert summary.written == 1
    started = service_events(caplog, "started")
    assert started == [
        "connections",
        "handler-threads",
        "concurrency",
        "reporter",
        "session",
        "session-tries",
        "completer",
        "job-log",
        "heartbeat",
        "maintainer",
        "dispatchers",
        "burst",
    ]
    assert service_events(caplog, "stopped") == started[::-1]
    wait_until(lambda: awa_backends() == 0)


def test_a_service_that_fails_to_start_stops_the_ones_started(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG, logger="awa_django.worker.service")

    async def refuse(self: Heartbeat) -> None:
        raise RuntimeError("heartbeat refused to start")

    monkeypatch.setattr(Heartbeat, "start", refuse)
    job_id = record.enqueue(n=1)
    config = config_from_settings(get_settings(), queues={"default": 2})
    with pytest.raises(RuntimeError, match="heartbeat refused to start"):
        asyncio.run(WorkerProcess(config, registry.get).run())

    started = service_events(caplog, "started")
    assert started == [
        "connections",
        "handler-threads",
        "concurrency",
        "reporter",
        "session",
        "session-tries",
        "completer",
        "job-log",
    ]
    assert service_events(caplog, "stopped") == started[::-1]
    # Stopped for real: the runtime row withdrawn, the pool and the session closed, and no
    # dispatcher ever claimed.
    assert awa.runtimes.list() == []
    wait_until(lambda: awa_backends() == 0)
    job = awa.get_job(job_id)
    assert job is not None and job.state == "available"


def test_a_service_that_fails_to_stop_does_not_keep_the_others_running(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG, logger="awa_django.worker.service")

    async def refuse(self: Heartbeat) -> None:
        raise RuntimeError("heartbeat refused to stop")

    monkeypatch.setattr(Heartbeat, "stop", refuse)
    record.enqueue(n=1)
    config = config_from_settings(get_settings(), queues={"default": 2}, burst=True)
    summary = asyncio.run(WorkerProcess(config, registry.get).run())

    assert summary.written == 1
    started = service_events(caplog, "started")
    assert "heartbeat" in started
    assert service_events(caplog, "stopped") == [s for s in started[::-1] if s != "heartbeat"]
    assert any(
        r.getMessage() == "service failed to stop name=heartbeat" and r.exc_info
        for r in caplog.records
    )
    assert awa.runtimes.list() == []
    wait_until(lambda: awa_backends() == 0)
