"""Django settings of the web-shaped benchmark's client processes.

One module for every system: a client process serves one system against that system's own
database (``DATABASE_URL``), so the apps of the others are installed but their tables never
exist there. awa_django runs with its shipped defaults; django-tasks-db is the database backend
of Django's task framework (the ``django_tasks`` backport on Django 5.2).
"""

from __future__ import annotations

import importlib.util

import environ

from benchmarks.web import QUEUES

env = environ.Env()

SECRET_KEY = "benchmarks-only-not-secret"
DEBUG = False
ALLOWED_HOSTS: list[str] = []

# Django 6 ships django.tasks; Django 5.2 has the backport, an app of its own.
TASKS_APP = [] if importlib.util.find_spec("django.tasks") else ["django_tasks"]

INSTALLED_APPS = [
    "awa_django",
    *TASKS_APP,
    "django_tasks_db",
    # An app so that awa's discovery imports benchmarks/jobs.py like any app's handlers.
    "benchmarks",
]

DATABASES = {"default": env.db("DATABASE_URL", default="postgres://awa@127.0.0.1:5432/awa")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"

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
