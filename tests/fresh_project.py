"""A Django project of its own for tests that run ``manage.py`` as a real subprocess: a fresh
database on the test server, a settings module in a temporary directory, and the environment
that points a subprocess at them."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from django.db import connection

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class FreshDatabase:
    """A database created on the test server for one test, and how to reach it."""

    name: str
    host: str
    port: str
    user: str
    password: str

    def databases_setting(self) -> str:
        """Python source of a ``DATABASES`` setting for this database."""
        return (
            "{'default': {'ENGINE': 'django.db.backends.postgresql', "
            f"'NAME': {self.name!r}, 'USER': {self.user!r}, 'PASSWORD': {self.password!r}, "
            f"'HOST': {self.host!r}, 'PORT': {self.port!r}}}}}"
        )

    def conninfo(self) -> str:
        return make_conninfo(self.name, self.host, self.port, self.user, self.password)


def make_conninfo(dbname: str, host: str, port: str, user: str, password: str) -> str:
    given = {"host": host, "port": port, "user": user, "password": password}
    return psycopg.conninfo.make_conninfo(
        dbname=dbname, **{key: value for key, value in given.items() if value}
    )


@contextmanager
def fresh_database(prefix: str = "awa_fresh") -> Iterator[FreshDatabase]:
    """Create an empty database on the server the test database lives on; drop it afterwards."""
    params = connection.settings_dict
    database = FreshDatabase(
        name=f"{prefix}_{uuid.uuid4().hex[:12]}",
        host=params["HOST"] or "",
        port=str(params["PORT"] or ""),
        user=params["USER"] or "",
        password=params["PASSWORD"] or "",
    )
    admin_dsn = make_conninfo(
        "postgres", database.host, database.port, database.user, database.password
    )
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{database.name}"')
    try:
        yield database
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database.name}" WITH (FORCE)')


def project_env(settings_module: str, *paths: Path | str) -> dict[str, str]:
    """The environment of a subprocess that runs with ``settings_module``, importable from
    ``paths`` (the checkout is not added: pass ``ROOT`` to run the checkout's awa_django)."""
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    env["DJANGO_SETTINGS_MODULE"] = settings_module
    env["PYTHONPATH"] = os.pathsep.join(str(path) for path in paths)
    return env


def run_django(
    env: dict[str, str],
    args: Sequence[str],
    *,
    python: str | Path = sys.executable,
    cwd: Path = ROOT,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``python -m django ARGS`` in ``env``; the result, whatever the exit status."""
    return subprocess.run(
        [str(python), "-m", "django", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
