"""Django settings of the web-shaped benchmark's client processes.

The benchmarks' own settings (``benchmarks.settings``: database from ``DATABASE_URL``, UTC,
``DEBUG`` off) plus the peers' apps. One module for every system: a client process serves one
system against that system's own database, so the apps of the others are installed but their
tables never exist there. awa_django runs with its shipped defaults; django-tasks-db is the
database backend of Django's task framework (the ``django_tasks`` backport on Django 5.2).
"""

from __future__ import annotations

import importlib.util

from benchmarks.settings import (
    ALLOWED_HOSTS,
    DATABASES,
    DEBUG,
    DEFAULT_AUTO_FIELD,
    SECRET_KEY,
    TIME_ZONE,
    USE_TZ,
)
from benchmarks.web import QUEUES

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

# Django 6 ships django.tasks; Django 5.2 has the backport, an app of its own.
TASKS_APP = [] if importlib.util.find_spec("django.tasks") else ["django_tasks"]

INSTALLED_APPS = [
    "awa_django",
    *TASKS_APP,
    "django_tasks_db",
    # An app so that awa's discovery imports benchmarks/jobs.py like any app's handlers.
    "benchmarks",
]

AWA = {
    "QUEUES": {name: {"concurrency": 8} for name in QUEUES},
    "DEFAULT_QUEUE": "bench",
}

TASKS = {
    "default": {
        "BACKEND": "django_tasks_db.DatabaseBackend",
        "QUEUES": list(QUEUES),
    }
}
