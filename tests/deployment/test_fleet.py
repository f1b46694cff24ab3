"""Fleets (issue #37): poll-only workers (AWA['WORKER_SESSION'] = False) through a real
PgBouncer in transaction pooling mode, with producers and the admin going through it too; and
a server whose max_connections fits two connections per worker process but not the six a
worker used to hold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings

from awa_django.checks import check_worker_session
from awa_django.conf import problems
from tests.conftest import REPO_ROOT, WorkerSubprocess, wait_until
from tests.deployment.pgbouncer import PgBouncer
from tests.processes.chaos_support import load_with_postgres

POLL_ONLY = {"WORKER_SESSION": False, "POLL_INTERVAL_S": 0.2, "LEADER_ELECTION_INTERVAL_S": 0.3}


@pytest.fixture
def bouncer(awa_db: None) -> Iterator[PgBouncer]:
    params = settings.DATABASES["default"]
    running = PgBouncer(
        server_host=params["HOST"] or "127.0.0.1",
        server_port=int(params["PORT"] or 5432),
        user=params["USER"],
    ).start()
    yield running
    running.stop()


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env={**os.environ, "AWA_JOB_MODULES": "tests.jobs", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


PRODUCE = """
from django.db import transaction
import awa_django as awa
from tests.jobs import nap
with transaction.atomic():
    ids = awa.enqueue_many(nap, [{"seconds": 0.01} for _ in range(60)])
print("IDS", ",".join(map(str, ids)))
"""

ADMIN = """
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
client = Client()
client.force_login(User.objects.create_superuser("fleet-admin", password="pw"))
page = client.get(reverse("admin:awa_django_job_changelist"))
print("STATUS", page.status_code, "ROWS", page.content.count(b"tests.nap"))
"""


def states(ids: list[int]) -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT state, count(*) FROM awa.jobs WHERE job_id = ANY(%s) GROUP BY state", [ids]
        )
        return dict(cursor.fetchall())


def test_poll_only_workers_producers_and_the_admin_work_through_pgbouncer(bouncer):
    through = {
        "DATABASE_URL": bouncer.url(connection.settings_dict["NAME"]),
        "AWA_OVERRIDES": json.dumps(POLL_ONLY),
    }
    # Two workers (both compete for the leader lease), every connection through PgBouncer.
    workers = [WorkerSubprocess("--queue", "default=4", env=through) for _ in range(2)]
    try:
        for worker in workers:
            worker.wait_ready()
        ids = [int(i) for i in manage(through, "shell", "-c", PRODUCE).split("IDS ")[1].split(",")]
        wait_until(lambda: states(ids) == {"completed": 60}, timeout=60)
        # One of them leads, through its lease.
        wait_until(lambda: sum("became maintenance leader" in w.output for w in workers) == 1)

        admin = manage(through, "shell", "-c", ADMIN)
        assert "STATUS 200" in admin and "ROWS 0" not in admin, admin
    finally:
        for worker in workers:
            worker.kill()
    # Every worker connection came through PgBouncer; none LISTENed or held a session lock.
    log = bouncer.log()
    assert "login attempt" in log
    for worker in workers:
        assert "session connection" not in worker.output, worker.output[-3000:]
        assert "Traceback" not in worker.output, worker.output[-3000:]


@pytest.fixture
def small_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """A private server with max_connections = 12: four worker processes at two connections
    each (AWA["WORKER_POOL_SIZE"] = 1) fit, at the six each used to hold they would not."""
    monkeypatch.setenv("WITH_POSTGRES_OPTIONS", "-c max_connections=12")
    with_postgres = load_with_postgres()
    server = with_postgres.Cluster()
    try:
        server.start()
        yield server
    finally:
        server.stop()


WORKERS = 4


def test_workers_at_two_connections_each_fit_a_small_max_connections(small_server):
    url = small_server.url  # type: ignore[attr-defined]
    overrides = {"POLL_INTERVAL_S": 0.2, "WORKER_POOL_SIZE": 1}
    env = {"DATABASE_URL": url, "AWA_OVERRIDES": json.dumps(overrides)}
    manage(env, "migrate", "--no-input", "-v", "0")
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SHOW max_connections").fetchone() == ("12",)
    workers = [WorkerSubprocess("--queue", "default=8", env=env) for _ in range(WORKERS)]
    try:
        for worker in workers:
            worker.wait_ready()
        ids = [int(i) for i in manage(env, "shell", "-c", PRODUCE).split("IDS ")[1].split(",")]

        def done() -> bool:
            with psycopg.connect(url, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM awa.jobs WHERE job_id = ANY(%s) AND state = 'completed'",
                    [ids],
                ).fetchone()
                return row is not None and row[0] == len(ids)

        wait_until(done, timeout=60, interval=0.2)
        time.sleep(0.5)
        with psycopg.connect(url, autocommit=True) as conn:
            held = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                "AND application_name LIKE 'awa_worker%%'"
            ).fetchone()
        assert held == (2 * WORKERS,)
        for worker in workers:
            assert worker.proc.poll() is None, worker.output[-3000:]
            assert "too many clients" not in worker.output
    finally:
        for worker in workers:
            worker.kill()


def test_worker_session_must_be_a_bool_and_false_silences_the_pooler_warning(monkeypatch):
    with override_settings(AWA={**settings.AWA, "WORKER_SESSION": "no"}):
        (problem,) = problems()
        assert problem.id == "awa.E060" and "WORKER_SESSION" in problem.message
    monkeypatch.setitem(settings.DATABASES["default"], "DISABLE_SERVER_SIDE_CURSORS", True)
    assert [w.id for w in check_worker_session()] == ["awa.W060"]
    with override_settings(AWA={**settings.AWA, "WORKER_SESSION": False}):
        assert check_worker_session() == []
