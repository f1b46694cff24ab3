"""What a web request of each compared system does besides the business row.

Every system is driven the way a Django view would use it, on the request thread's own Django
connection: ``transaction.atomic()`` around the business row, the enqueue and the rest of the
request's work. pgqueuer is the exception: its psycopg driver refuses a connection that is not
in autocommit mode, so its request runs in psycopg's ``Connection.transaction()`` on the same
Django connection, which is the same BEGIN ... COMMIT without Django's bookkeeping.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.sidebyside.systems.base import ORDERS_DDL, package_versions

SETTINGS = "benchmarks.web.settings"
AWA_KIND = "bench.probe_async"


def setup_django(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    import django

    django.setup()


def _create_orders(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(ORDERS_DDL)


def _migrate_in_client(url: str, system: str) -> None:
    """Django installs run in a client process: this one never sets Django up."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.web.client",
            "--install",
            "--system",
            system,
            "--url",
            url,
        ],
        check=True,
    )


class WebSystem(ABC):
    name: str
    packages: tuple[str, ...] = ()

    def versions(self) -> dict[str, str]:
        return package_versions(self.packages)

    def install(self, url: str) -> None:
        """Create the system's schema (and the business table) in the empty database."""
        _create_orders(url)

    def install_in_client(self) -> None:
        """The part of ``install`` that needs Django (run by ``client --install``)."""
        return None

    def close(self) -> None:
        return None

    def open(self, url: str) -> None:
        """Client side, once, after Django is set up and before the request threads start."""
        return None

    def transaction(self) -> AbstractContextManager[Any]:
        from django.db import transaction

        return transaction.atomic()

    @abstractmethod
    def enqueue(self, queue: str, args: dict[str, Any]) -> None:
        """One job on ``queue``, inside the request's open transaction."""


class NoQueue(WebSystem):
    """The ceiling: the same request without any enqueue."""

    name = "none"

    def enqueue(self, queue: str, args: dict[str, Any]) -> None:
        return None


class AwaDjango(WebSystem):
    name = "awa_django"
    packages = ("awa-django", "Django", "psycopg")

    def install(self, url: str) -> None:
        super().install(url)
        _migrate_in_client(url, self.name)

    def install_in_client(self) -> None:
        from django.core.management import call_command

        call_command("migrate", "awa_django", verbosity=0, interactive=False)

    def enqueue(self, queue: str, args: dict[str, Any]) -> None:
        import awa_django as awa

        awa.enqueue(AWA_KIND, args=args, queue=queue)


class DjangoTasksDb(WebSystem):
    """django-tasks-db: Django's task framework with its database backend."""

    name = "django_tasks_db"
    packages = ("django-tasks-db", "django-tasks", "Django")

    def install(self, url: str) -> None:
        super().install(url)
        _migrate_in_client(url, self.name)

    def install_in_client(self) -> None:
        from django.core.management import call_command

        call_command("migrate", "django_tasks_database", verbosity=0, interactive=False)

    def enqueue(self, queue: str, args: dict[str, Any]) -> None:
        from benchmarks.web.tasks import bench_noop

        bench_noop.using(queue_name=queue).enqueue(**args)


class Procrastinate(WebSystem):
    """procrastinate, deferring on the request's own connection so the job joins its
    transaction (``Task.configure(connection=...)``)."""

    name = "procrastinate"
    packages = ("procrastinate", "psycopg")

    def __init__(self) -> None:
        self._app: Any = None
        self._task: Any = None

    def _build(self, url: str) -> None:
        import procrastinate

        self._app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector(conninfo=url))

        @self._app.task(name="bench_noop", queue="bench")
        def noop(n: int, payload: str) -> None:
            return None

        self._task = noop

    def install(self, url: str) -> None:
        super().install(url)
        self._build(url)
        with self._app.open():
            self._app.schema_manager.apply_schema()
        self._app = None

    def open(self, url: str) -> None:
        self._build(url)
        self._app.open()

    def close(self) -> None:
        if self._app is not None:
            self._app.close()

    def enqueue(self, queue: str, args: dict[str, Any]) -> None:
        from django.db import connection

        self._task.configure(connection=connection.connection, queue=queue).defer(**args)


class PgQueuer(WebSystem):
    """pgqueuer on the request's connection (its synchronous psycopg driver)."""

    name = "pgqueuer"
    packages = ("pgqueuer", "psycopg")

    def install(self, url: str) -> None:
        super().install(url)
        import asyncpg
        from pgqueuer.db import AsyncpgDriver
        from pgqueuer.queries import Queries

        async def install() -> None:
            conn = await asyncpg.connect(url)
            await Queries(AsyncpgDriver(conn)).install()
            await conn.close()

        asyncio.run(install())

    @contextmanager
    def _psycopg_transaction(self) -> Iterator[None]:
        from django.db import connection

        connection.ensure_connection()
        with connection.connection.transaction():
            yield

    def transaction(self) -> AbstractContextManager[Any]:
        return self._psycopg_transaction()

    def enqueue(self, queue: str, args: dict[str, Any]) -> None:
        from django.db import connection
        from pgqueuer.db import SyncPsycopgDriver
        from pgqueuer.queries import SyncQueries

        payload = json.dumps(args, separators=(",", ":")).encode()
        SyncQueries(SyncPsycopgDriver(connection.connection)).enqueue(queue, payload)


class Prototype(WebSystem):
    """One of the producer designs compared for commit-time lane positions, in plain SQL
    (``prototypes.sql``): the job's row and its lane position, no worker side."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.name = f"proto_{mode}"

    def install(self, url: str) -> None:
        super().install(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(PROTOTYPES.read_text())

    def enqueue(self, queue: str, args: dict[str, Any]) -> None:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT proto.enqueue(%s, %s, %s::jsonb)",
                [self.mode, queue, json.dumps(args, separators=(",", ":"))],
            )


class BareRow(WebSystem):
    """The floor of any queue that writes a job's row in a statement of its own: one plain
    ``INSERT`` of the job's queue and arguments into a table with a primary key alone, on the
    request's cursor; no function, no trigger, nothing at commit."""

    name = "bare_row"

    def install(self, url: str) -> None:
        super().install(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE bare_jobs (id bigserial PRIMARY KEY, queue text NOT NULL,"
                " args jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now())"
            )

    def enqueue(self, queue: str, args: dict[str, Any]) -> None:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO bare_jobs (queue, args) VALUES (%s, %s::jsonb)",
                [queue, json.dumps(args, separators=(",", ":"))],
            )


PROTOTYPES = Path(__file__).with_name("prototypes.sql")

SYSTEMS: dict[str, WebSystem] = {
    system.name: system
    for system in (NoQueue(), AwaDjango(), DjangoTasksDb(), Procrastinate(), PgQueuer())
}
# Not run unless named (--systems proto_commit_shared bare_row ...).
PROTOTYPE_SYSTEMS: dict[str, WebSystem] = {
    system.name: system
    for system in (
        *(
            Prototype(mode)
            for mode in ("call_lock", "commit_lock", "commit_shared", "commit_shared_notify")
        ),
        BareRow(),
    )
}
