"""Producers through a real PgBouncer in transaction pooling mode; workers on a session
connection named by AWA['WORKER_DATABASE']; the check that warns when they are not."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings

import awa_django as awa
from awa_django.checks import check_worker_session
from awa_django.conf import problems
from tests.conftest import REPO_ROOT
from tests.deployment.pgbouncer import PgBouncer

# pytest-django names the nested run's database test_<name>: a scratch database of this suite.
NESTED_NAME = f"{settings.DATABASES['default']['NAME']}_pgbouncer"
NESTED_TEST_DB = f"test_{NESTED_NAME}"


def direct_url(dbname: str) -> str:
    params = settings.DATABASES["default"]
    auth = params["USER"] + (f":{params['PASSWORD']}" if params["PASSWORD"] else "")
    return f"postgresql://{auth}@{params['HOST']}:{params['PORT']}/{dbname}"


def drop_nested_database() -> None:
    with psycopg.connect(direct_url("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{NESTED_TEST_DB}"')


@pytest.fixture
def scratch_database() -> Iterator[None]:
    drop_nested_database()
    yield
    drop_nested_database()  # after PgBouncer (set up later, torn down first) let go of it


@pytest.fixture
def pgbouncer(scratch_database: None) -> Iterator[PgBouncer]:
    params = settings.DATABASES["default"]
    bouncer = PgBouncer(
        server_host=params["HOST"] or "127.0.0.1",
        server_port=int(params["PORT"] or 5432),
        user=params["USER"],
    )
    bouncer.start()
    yield bouncer
    bouncer.stop()


def test_the_enqueue_tests_pass_through_pgbouncer_in_transaction_mode(pgbouncer):
    # The suite's own enqueue, run_jobs and eager tests in a nested pytest whose Django database
    # is reached through PgBouncer; its in-process workers use WORKER_DATABASE, a direct DSN.
    env = {
        **os.environ,
        "DATABASE_URL": pgbouncer.url(NESTED_NAME),
        "AWA_OVERRIDES": json.dumps({"WORKER_DATABASE": direct_url(NESTED_TEST_DB)}),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            # Kept, not dropped, at the end: PgBouncer still holds server connections to it.
            "--reuse-db",
            "tests/test_enqueue.py",
            "tests/testing/test_run_jobs.py",
            "tests/testing/test_eager.py",
            # Lanes created on a connection of their own, before the producer's transaction.
            "tests/storage/test_lane_creation.py",
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    passed = re.search(r"(\d+) passed", output)
    assert passed and int(passed.group(1)) >= 30 and "failed" not in output, output[-3000:]
    # The Django connections of that run really went through PgBouncer.
    assert f"login attempt: db={NESTED_TEST_DB}" in pgbouncer.log()


PRODUCER = """
from datetime import timedelta
from django.db import transaction
import awa_django as awa
from tests.jobs import record

with transaction.atomic():
    ids = [record.enqueue(n=n) for n in range(10)]
    ids += record.enqueue_many([{"n": n} for n in range(10, 30)])
with transaction.atomic():
    record.enqueue(n=-1)
    transaction.set_rollback(True)
ids.append(awa.enqueue(record, args={"n": 99}, run_at=timedelta(seconds=1)))
print("IDS", ",".join(map(str, ids)))
"""


def test_a_worker_on_worker_database_drains_jobs_enqueued_through_pgbouncer(
    pgbouncer, worker_process
):
    test_db = connection.settings_dict["NAME"]
    through_pgbouncer = {"DATABASE_URL": pgbouncer.url(test_db)}
    produced = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", PRODUCER],
        cwd=REPO_ROOT,
        env={**os.environ, **through_pgbouncer},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert produced.returncode == 0, produced.stderr
    ids = [int(i) for i in produced.stdout.split("IDS ")[1].split(",")]
    assert len(ids) == 31

    worker = worker_process(
        "--burst",
        "--burst-wait",
        "5",
        env={
            **through_pgbouncer,  # the handlers' own ORM work goes through PgBouncer too
            "AWA_OVERRIDES": json.dumps(
                {"WORKER_DATABASE": direct_url(test_db), "POLL_INTERVAL_S": 0.2}
            ),
        },
    )

    assert worker.wait(120) == 0, worker.output
    assert {job.state for job in awa.get_jobs(ids)} == {"completed"}
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), count(*) FILTER (WHERE note = '-1') FROM tests_job_runs")
        assert cursor.fetchone() == (31, 0)


def test_the_check_warns_when_workers_would_use_a_transaction_pooler(monkeypatch):
    monkeypatch.setitem(settings.DATABASES["default"], "DISABLE_SERVER_SIDE_CURSORS", True)

    (warning,) = check_worker_session()
    assert warning.id == "awa.W060" and "'default'" in warning.msg

    dsn = "postgresql://app@db.internal:5432/app"
    with override_settings(AWA={**settings.AWA, "WORKER_DATABASE": dsn}):
        assert check_worker_session() == []


def test_worker_database_must_be_an_alias_or_a_dsn():
    with override_settings(AWA={**settings.AWA, "WORKER_DATABASE": "replica"}):
        assert [p.id for p in problems()] == ["awa.E061"]
    with override_settings(AWA={**settings.AWA, "WORKER_DATABASE": "host=db dbname=app"}):
        assert problems() == []


def test_a_worker_database_dsn_keeps_its_own_options():
    from awa_django.storage.connections import connection_kwargs

    params = connection_kwargs("postgresql://app@db:5433/app?options=-c%20idle_session_timeout%3D0")

    assert (params["host"], params["port"], params["dbname"], params["user"]) == (
        "db",
        "5433",
        "app",
        "app",
    )
    assert params["options"] == "-c idle_session_timeout=0 -c jit=off -c TimeZone=UTC"
    assert params["application_name"] == "awa_worker"
