"""Settings of the chaos soak (benchmarks/soak.py): the benchmark settings with a soak queue
that dead-letters, a cron entry every minute, and small ring and retention settings so that
rotation and prune turn over many times in a run. ``AWA_OVERRIDES`` (JSON) changes any of it."""

from __future__ import annotations

import environ

from benchmarks.settings import *  # noqa: F403 - the benchmark settings, extended below
from benchmarks.settings import AWA as BENCH_AWA
from benchmarks.settings import DATABASES as BENCH_DATABASES

# Worker processes keep their handler threads' connections, as a deployment should
# (docs/deployment.md): with Django's default CONN_MAX_AGE of 0, every soak job, which writes
# its run row through the ORM, opened a connection of its own (some 240 a second at 300 jobs/s),
# which cost a 2-core machine more than the load itself.
DATABASES = {
    **BENCH_DATABASES,
    "default": {**BENCH_DATABASES["default"], "CONN_MAX_AGE": 60, "CONN_HEALTH_CHECKS": True},
}

AWA = {
    **BENCH_AWA,
    "QUEUES": {"soak": {"concurrency": 16, "dlq": True}},
    "DEFAULT_QUEUE": "soak",
    "JOB_MODULES": ["benchmarks.soak_jobs"],
    "CRON": [{"name": "soak-cron", "schedule": "* * * * *", "job": "soak.cron"}],
    "RING_INTERVAL_S": 0.5,
    "COMPLETED_RETENTION_S": 5.0,
    "FAILED_RETENTION_S": 5.0,
    "RETRY_BACKOFF_BASE_S": 0.5,
    "HEARTBEAT_INTERVAL_S": 1.0,
    "HEARTBEAT_STALENESS_S": 5.0,
    "RESCUE_INTERVAL_S": 1.0,
    "LEADER_ELECTION_INTERVAL_S": 1.0,
    **environ.Env().json("AWA_OVERRIDES", default={}),
}
