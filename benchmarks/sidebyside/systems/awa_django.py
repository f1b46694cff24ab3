"""awa_django, this project: driven through its public API and its real worker command.

Enqueue runs in the harness process with Django configured by ``benchmarks.settings`` against
the system's database; the worker is ``manage.py awa_worker`` run in the worker process via
``call_command``, exactly what a deployment runs, which stops gracefully on SIGTERM.
"""

from __future__ import annotations

import os
from typing import Any

import psycopg

from benchmarks.sidebyside.systems.base import (
    ORDERS_INSERT,
    QUEUE,
    TASK_MODES,
    System,
    create_orders_table,
)

SETTINGS = "benchmarks.settings"
OUTSTANDING = (
    "SELECT (SELECT count(*) FROM awa.ready_entries)"
    " - (SELECT count(*) FROM awa.done_entries WHERE outcome = 'completed')"
)


def _setup_django(url: str) -> None:
    # benchmarks.settings reads DATABASE_URL once, at setup; every run uses the same database
    # name (recreated from a template), so the first URL stays right.
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    import django

    django.setup()


def _kind(mode: str) -> str:
    from benchmarks.jobs import PROBE_ASYNC_KIND, PROBE_SYNC_KIND

    return PROBE_SYNC_KIND if mode == "sync" else PROBE_ASYNC_KIND


class AwaDjango(System):
    name = "awa_django"
    packages = ("awa-django", "Django", "psycopg")
    modes = ("async", "sync")
    # The same no-op as a native job beside it as a django.tasks task (AwaBackend).
    task_modes = ("sync", "async", *TASK_MODES)
    tables_predicate = "schemaname = 'awa'"

    def install(self, url: str) -> None:
        _setup_django(url)
        from django.core.management import call_command
        from django.db import connections

        call_command("migrate", verbosity=0, interactive=False)
        connections.close_all()
        create_orders_table(url)

    def open(self, url: str) -> None:
        _setup_django(url)

    def close(self) -> None:
        from django.db import connections

        connections.close_all()

    def enqueue_bulk(self, args_list: list[dict[str, Any]], mode: str = "async") -> None:
        import awa_django as awa

        if mode in TASK_MODES:
            from benchmarks.tasks import enqueue_tasks

            enqueue_tasks(args_list, mode)
            return
        awa.enqueue_many(_kind(mode), args_list)

    def enqueue_one(self, args: dict[str, Any]) -> None:
        import awa_django as awa

        awa.enqueue(_kind("async"), args=args)

    def order_and_enqueue(self, args: dict[str, Any]) -> None:
        from django.db import connection, transaction

        import awa_django as awa

        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(ORDERS_INSERT, ["customer", 12.5])
            awa.enqueue(_kind("async"), args=args)

    def thread_done(self) -> None:
        from django.db import connections

        connections.close_all()

    def outstanding(self, conn: psycopg.Connection[Any]) -> int:
        row = conn.execute(OUTSTANDING).fetchone()
        return int(row[0]) if row else 0

    def prepare_worker(self, url: str) -> None:
        _setup_django(url)
        # The worker's code is imported before the clock starts, as the other systems' modules
        # are (imported with this harness module); call_command would import it after.
        import awa_django.management.commands.awa_worker  # noqa: F401

    def run_worker(self, url: str, concurrency: int, mode: str) -> None:
        from django.core.management import call_command

        call_command("awa_worker", "--queue", f"{QUEUE}={concurrency}", verbosity=0)


SYSTEM = AwaDjango()
