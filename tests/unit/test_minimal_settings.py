"""awa's system checks in the smallest project that installs it: contenttypes, auth and
awa_django, no ROOT_URLCONF, no admin (a worker-only settings module). ``manage.py check`` and
``migrate`` run as real subprocesses, on a database of their own."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]

SETTINGS = """
import os
SECRET_KEY = "minimal-settings-test"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "awa_django"]
DATABASES = {{"default": {{
    "ENGINE": "django.db.backends.postgresql",
    "NAME": {name!r}, "USER": {user!r}, "PASSWORD": {password!r},
    "HOST": {host!r}, "PORT": {port!r},
}}}}
USE_TZ = True
AWA = {{"QUEUES": {{"default": {{"concurrency": 2}}}}}}
"""


@pytest.fixture
def minimal_project(tmp_path: Path) -> Iterator[dict[str, str]]:
    params = connection.settings_dict
    name = f"awa_minimal_{uuid.uuid4().hex[:12]}"
    server = {
        "host": params["HOST"] or "",
        "port": str(params["PORT"] or ""),
        "user": params["USER"] or "",
        "password": params["PASSWORD"] or "",
    }
    admin_dsn = psycopg.conninfo.make_conninfo(
        dbname="postgres", **{key: value for key, value in server.items() if value}
    )
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    (tmp_path / "minimal_settings.py").write_text(SETTINGS.format(name=name, **server))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "minimal_settings",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
    }
    try:
        yield env
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def django_admin(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "django", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_check_and_migrate_run_without_root_urlconf(minimal_project):
    check = django_admin(minimal_project, "check")
    assert check.returncode == 0, check.stderr
    assert "Traceback" not in check.stderr
    migrate = django_admin(minimal_project, "migrate", "--no-input")
    assert migrate.returncode == 0, migrate.stderr
    assert "Applying awa_django.0001" in migrate.stdout
    after = django_admin(minimal_project, "check", "--database", "default")
    assert after.returncode == 0, after.stderr
    assert "awa." not in after.stdout + after.stderr
