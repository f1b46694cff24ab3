"""Django settings for the benchmarks: only ``awa_django`` and the benchmark handlers.

Deliberately standalone rather than importing ``example_project.settings``: the example site's
apps bring their own migrations, handlers and queues, and a benchmark should measure the queue,
not whatever the demo does this week. ``DATABASE_URL`` names the database, exactly as for the
example project, so ``scripts/with_postgres.py`` works unchanged.
"""

from __future__ import annotations

import environ

env = environ.Env()

SECRET_KEY = "benchmarks-only-not-secret"
# DEBUG would make Django keep every executed query in memory, which skews the single-enqueue
# loop; benchmarks always run with it off.
DEBUG = False
ALLOWED_HOSTS: list[str] = []

INSTALLED_APPS = [
    "awa_django",
    # An app so that the worker's discovery imports benchmarks/jobs.py like any app's handlers.
    "benchmarks",
]

DATABASES = {"default": env.db("DATABASE_URL", default="postgres://awa@127.0.0.1:5432/awa")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"

# Shipped defaults everywhere except the queue and the job log: the numbers should describe what
# a user gets. The worker's concurrency is chosen per run with ``awa_worker --queue bench=N``.
# A drain of no-op jobs finishes thousands a second, where docs/observability.md has operators
# switch the job log to its per-queue summary; one line per job would time the worker's
# terminal (the drains run at ``-v 1``, where those lines are on).
AWA = {
    "QUEUES": {"bench": {"concurrency": 8}},
    "DEFAULT_QUEUE": "bench",
    "JOB_LOG": "summary",
}

# Any other AWA key, as JSON: benchmarks/fleet.py declares its queues q0, q1, ... this way.
AWA.update(env.json("AWA_OVERRIDES", default={}))

# The task drain's django.tasks functions (benchmarks/tasks.py) run on awa.
TASKS = {"default": {"BACKEND": "awa_django.tasks.AwaBackend", "QUEUES": ["bench"]}}
