"""awa_django: a Postgres-native background job queue for Django.

The public API, re-exported; ``import awa_django as awa`` and use ``awa.job``, ``awa.enqueue``.
"""

from __future__ import annotations

from awa_django import cron, descriptors, dlq, health, queues, runtimes
from awa_django.actions import cancel, cancel_unique, retry
from awa_django.cron.declarations import periodic
from awa_django.enqueue import enqueue, enqueue_many, enqueue_on_commit
from awa_django.exceptions import (
    AttemptRescued,
    AwaError,
    Cancel,
    ConfigError,
    ConfirmationRequired,
    InvalidJob,
    InvalidSchedule,
    JobOutcome,
    RetryAfter,
    Snooze,
    TerminalError,
    UniqueConflict,
    UnknownJobKind,
)
from awa_django.jobs import Job, JobContext, job
from awa_django.records import get_job, get_jobs, list_jobs
from awa_django.storage.jobs import JobRecord
from awa_django.unique import Unique

__all__ = [
    "AttemptRescued",
    "AwaError",
    "Cancel",
    "ConfigError",
    "ConfirmationRequired",
    "InvalidJob",
    "InvalidSchedule",
    "Job",
    "JobContext",
    "JobOutcome",
    "JobRecord",
    "RetryAfter",
    "Snooze",
    "TerminalError",
    "Unique",
    "UniqueConflict",
    "UnknownJobKind",
    "cancel",
    "cancel_unique",
    "cron",
    "descriptors",
    "dlq",
    "enqueue",
    "enqueue_many",
    "enqueue_on_commit",
    "get_job",
    "get_jobs",
    "health",
    "job",
    "list_jobs",
    "periodic",
    "queues",
    "retry",
    "runtimes",
]
