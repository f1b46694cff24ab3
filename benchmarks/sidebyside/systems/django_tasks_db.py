"""django-tasks-db: Django's task framework with its database backend, run by its own worker
(``manage.py db_worker``), on the task drain's ``@task`` functions (``benchmarks/tasks.py``).

It takes part in the task drain only. Django is set up once per process with one settings
module, and the harness's process has awa_django's, so this adapter's harness side (migrate,
enqueue) runs in a short child process with ``benchmarks.sidebyside.tasks_db_settings``:
``python -m benchmarks.sidebyside.systems.django_tasks_db install|enqueue URL``. Its worker
runs one task at a time: concurrency C is C ``db_worker`` processes (see ``run.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

import psycopg

from benchmarks.sidebyside.processes import REPO_ROOT
from benchmarks.sidebyside.systems.base import QUEUE, TASK_MODES, System

SETTINGS = "benchmarks.sidebyside.tasks_db_settings"
OUTSTANDING = "SELECT count(*) FROM django_tasks_database_dbtaskresult WHERE status <> 'SUCCESSFUL'"


def _setup_django(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    import django

    django.setup()


def _in_child(command: str, url: str, *, mode: str = "", stdin: str = "") -> None:
    done = subprocess.run(
        [sys.executable, "-m", __name__, command, url, "--mode", mode],
        cwd=REPO_ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"django_tasks_db {command} failed:\n{done.stdout}\n{done.stderr}")


class DjangoTasksDb(System):
    name = "django_tasks_db"
    packages = ("django-tasks-db", "django-tasks", "Django", "psycopg")
    modes = ()
    task_modes = TASK_MODES
    tasks_only = True
    one_task_per_process = True
    tables_predicate = "relname = 'django_tasks_database_dbtaskresult'"

    def install(self, url: str) -> None:
        _in_child("install", url)

    def open(self, url: str) -> None:
        self._url = url

    def close(self) -> None:
        return None

    def enqueue_bulk(self, args_list: list[dict[str, Any]], mode: str = "task-async") -> None:
        _in_child("enqueue", self._url, mode=mode, stdin=json.dumps(args_list))

    def enqueue_one(self, args: dict[str, Any]) -> None:
        raise NotImplementedError("django_tasks_db takes part in the task drain only")

    def order_and_enqueue(self, args: dict[str, Any]) -> None:
        raise NotImplementedError("django_tasks_db takes part in the task drain only")

    def outstanding(self, conn: psycopg.Connection[Any]) -> int:
        row = conn.execute(OUTSTANDING).fetchone()
        return int(row[0]) if row else 0

    def prepare_worker(self, url: str) -> None:
        _setup_django(url)
        import django_tasks_db.management.commands.db_worker  # noqa: F401

    def run_worker(self, url: str, concurrency: int, mode: str) -> None:
        from django.core.management import call_command

        try:
            call_command("db_worker", "--queue-name", QUEUE, "--no-startup-delay", verbosity=0)
        except SystemExit as stop:
            # Its SIGTERM handler exits the process from an idle worker: a graceful stop.
            if stop.code not in (0, None):
                raise


SYSTEM = DjangoTasksDb()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}")
    parser.add_argument("command", choices=("install", "enqueue"))
    parser.add_argument("url")
    parser.add_argument("--mode", default="")
    args = parser.parse_args(argv)
    _setup_django(args.url)
    if args.command == "install":
        from django.core.management import call_command

        call_command("migrate", "django_tasks_database", verbosity=0, interactive=False)
    else:
        from benchmarks.tasks import enqueue_tasks

        enqueue_tasks(json.load(sys.stdin), args.mode)
    return 0


if __name__ == "__main__":
    sys.exit(main())
