"""Django settings of the side-by-side django-tasks-db system: the benchmarks' own settings
(``benchmarks.settings``: database from ``DATABASE_URL``, UTC, ``DEBUG`` off) with
django-tasks-db as the task backend, so that ``benchmarks/tasks.py``'s functions are stored in
its table and run by its ``db_worker``. awa_django stays installed only because the benchmark
modules import it; its schema is never created in this system's database."""

from __future__ import annotations

from benchmarks.settings import (
    ALLOWED_HOSTS,
    AWA,
    DATABASES,
    DEBUG,
    DEFAULT_AUTO_FIELD,
    SECRET_KEY,
    TIME_ZONE,
    USE_TZ,
)
from benchmarks.web.settings import TASKS_APP

__all__ = [
    "ALLOWED_HOSTS",
    "AWA",
    "DATABASES",
    "DEBUG",
    "DEFAULT_AUTO_FIELD",
    "INSTALLED_APPS",
    "SECRET_KEY",
    "TASKS",
    "TIME_ZONE",
    "USE_TZ",
]

INSTALLED_APPS = ["awa_django", *TASKS_APP, "django_tasks_db", "benchmarks"]

TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["bench"]}}
