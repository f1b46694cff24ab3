"""Shared fixtures: a clean awa schema per transactional test, in-process burst workers, and
real ``manage.py awa_worker`` subprocesses against the test database."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.management.color import no_style
from django.db import connection, connections
from django.test import TransactionTestCase, override_settings
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

import awa_django as awa
from awa_django.conf import get_settings
from awa_django.declarations.jobs import registry
from awa_django.testing import BackgroundWorker, reset_queue  # noqa: F401 (re-exported)
from awa_django.worker.process import RunSummary, WorkerProcess, config_from_settings

REPO_ROOT = Path(__file__).resolve().parent.parent

# No per-example time limit and no check that generating inputs is slow in the property tests:
# CI's two legs share two cores, so both would measure the machine's load instead of the code
# (each failed a run under load that passed alone); performance is measured in benchmarks/.
hypothesis_settings.register_profile(
    "awa", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile("awa")

# Registers the handlers the tests use.
import tests.jobs  # noqa: E402, F401


def wait_until(
    predicate: Callable[[], object], timeout: float = 15.0, interval: float = 0.02
) -> None:
    """Poll ``predicate`` until it is truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s: {predicate}")


def truncate_awa_tables() -> None:
    """Empty the awa schema (``awa_django.testing.reset_queue``) and the runs the handlers log."""
    reset_queue()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE tests_job_runs")


@pytest.fixture
def storage_kinds() -> Iterator[None]:
    """The storage, maintenance and scheduling tests enqueue throwaway kinds named "k.<what>"
    that no handler registers: they drive the queue's statements themselves and run no handler.
    A producer refuses such a kind unless ``AWA["EXTERNAL_KINDS"]`` lists it, as another
    service's kind would be, so this lists them, on top of the settings in force."""
    with override_settings(AWA={**settings.AWA, "EXTERNAL_KINDS": ["k.*"]}):
        yield


@pytest.fixture
def no_telemetry_sdk(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """OpenTelemetry as in a process that installed no SDK. tests/observability installs SDK
    providers for the rest of the session (OpenTelemetry takes one per process), so a test that
    counts the calls of the default path would otherwise count the SDK's, depending on order."""
    from opentelemetry import metrics, trace
    from opentelemetry.metrics import _internal as metrics_internal

    from awa_django.telemetry import get_telemetry

    # The process-wide proxies forward to the SDK once one is set: fresh ones stand in for
    # them, and the global tracer provider is hidden from the proxy tracers they make.
    for module in (metrics, metrics_internal):
        monkeypatch.setattr(
            module, "get_meter_provider", lambda: metrics_internal._ProxyMeterProvider()
        )
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: trace.ProxyTracerProvider())
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    get_telemetry.cache_clear()
    yield
    get_telemetry.cache_clear()


@pytest.fixture
def awa_db(transactional_db: None) -> Iterator[None]:
    """A committed-transactions database whose awa tables are emptied after the test."""
    truncate_awa_tables()
    yield
    truncate_awa_tables()


def close_this_threads_connection() -> None:
    # Looked up in the calling thread: Django connections are per thread.
    connection.close()


@pytest.fixture
def close_orm_thread_connection() -> Iterator[None]:
    """Async handlers reach the ORM on asgiref's one shared thread; its connection must not
    outlive the test database."""
    yield
    asyncio.run(sync_to_async(close_this_threads_connection)())


def run_burst(*, burst_wait_s: float = 0.0, queues: dict[str, int] | None = None) -> RunSummary:
    """Run a worker in this process until it drains, like ``awa_worker --burst``."""
    config = config_from_settings(
        get_settings(), queues=queues, burst=True, burst_wait_s=burst_wait_s
    )
    return asyncio.run(WorkerProcess(config, registry.get).run())


def job_no_worker_knows(kind: str = "nobody.knows", queue: str = "default") -> int:
    """A job of ``kind`` (enqueued as another service's kind) that a burst worker of this process,
    which has no handler for it, tried once: retryable, waiting for a worker that knows it."""
    with override_settings(AWA={**settings.AWA, "EXTERNAL_KINDS": [kind]}):
        job_id = awa.enqueue(kind, args={}, queue=queue, max_attempts=1)
        run_burst()
    return job_id


def subprocess_database_url() -> str:
    params = connection.settings_dict
    auth = params["USER"] + (f":{params['PASSWORD']}" if params["PASSWORD"] else "")
    return f"postgres://{auth}@{params['HOST']}:{params['PORT']}/{params['NAME']}"


class WorkerSubprocess:
    """A real ``manage.py awa_worker`` subprocess on the test database."""

    def __init__(
        self, *args: str, env: dict[str, str] | None = None, command: str = "awa_worker"
    ) -> None:
        full_env = {
            **os.environ,
            "DATABASE_URL": subprocess_database_url(),
            "AWA_JOB_MODULES": "tests.jobs",
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        self.log = bytearray()
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", command, "-v", "2", *args],
            cwd=REPO_ROOT,
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.log.extend(line)

    @property
    def output(self) -> str:
        return self.log.decode(errors="replace")

    def wait_ready(self, timeout: float = 30.0) -> WorkerSubprocess:
        wait_until(lambda: "worker ready" in self.output or self.proc.poll() is not None, timeout)
        assert "worker ready" in self.output, self.output
        return self

    def wait(self, timeout: float = 60.0) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def worker_process(awa_db: None) -> Iterator[Callable[..., WorkerSubprocess]]:
    """Start real worker subprocesses; any still running are killed after the test."""
    started: list[WorkerSubprocess] = []

    def start(
        *args: str, env: dict[str, str] | None = None, command: str = "awa_worker"
    ) -> WorkerSubprocess:
        process = WorkerSubprocess(*args, env=env, command=command)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: object) -> None:
    """Adds the table test handlers record their executions in (see tests/jobs.py)."""
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE IF NOT EXISTS tests_job_runs (id bigserial PRIMARY KEY, job_id bigint, "
            "run_lease bigint, attempt integer, note text, "
            "at timestamptz DEFAULT clock_timestamp())"
        )


@pytest.fixture(scope="session", autouse=True)
def fast_password_hashing() -> Iterator[None]:
    """The tests create a staff user per admin test; the production hasher's deliberate slowness
    (~0.2 s a user) would add minutes to the suite and tests nothing of ours. Subprocesses (a
    fresh project, the installed wheel) keep their own settings."""
    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


# Content types and permissions are written once by migrate and never by a test: a test that
# commits leaves them as they were.
_KEPT_TABLES = frozenset({"django_content_type", "auth_permission"})


def _flush_test_rows(case: TransactionTestCase) -> None:
    """Empty every table of the test database but the content types and permissions.

    Django's own flush after a committing test empties those too and then runs the post_migrate
    handlers to write them again: ~60 of its ~100 ms, for each of the suite's ~1,200
    committing tests."""
    for alias in case._databases_names(include_mirrors=False):
        db = connections[alias]
        tables = db.introspection.django_table_names(only_existing=True, include_views=False)
        db.ops.execute_sql_flush(db.ops.sql_flush(no_style(), sorted(set(tables) - _KEPT_TABLES)))


@pytest.fixture(scope="session", autouse=True)
def flush_without_post_migrate() -> Iterator[None]:
    """Replaces the flush after each committing test (pytest-django's ``transactional_db``
    runs Django's ``TransactionTestCase`` teardown) by ``_flush_test_rows``."""
    original = TransactionTestCase._fixture_teardown
    TransactionTestCase._fixture_teardown = _flush_test_rows
    try:
        yield
    finally:
        TransactionTestCase._fixture_teardown = original
