"""awa_django: a Postgres-native background job queue for Django.

The public API, re-exported; ``import awa_django as awa`` and use ``awa.job``, ``awa.enqueue``.
"""

from __future__ import annotations

# Read by the build (pyproject.toml) without importing the package: keep it a string literal.
__version__ = "0.2.0.dev0"

from awa_django.callbacks.external import (
    callback_url,
    complete_external,
    fail_external,
    heartbeat_callback,
    resume_external,
    retry_external,
)
from awa_django.callbacks.signing import sign_callback
from awa_django.declarations.enqueue_options import EnqueueOptions

# ``awa.Job``: the public name of a declared job (``awa_django.models.Job`` is the table's model).
from awa_django.declarations.jobs import DeclaredJob as Job
from awa_django.declarations.jobs import JobContext
from awa_django.declarations.pending_job import PendingJob
from awa_django.declarations.unique import Unique
from awa_django.exceptions import (
    AttemptRescued,
    AwaError,
    CallbackError,
    CallbackFailed,
    Cancel,
    ConfigError,
    ConfirmationRequired,
    DeadlineExceeded,
    InvalidCallback,
    InvalidJob,
    InvalidSchedule,
    JobFailed,
    JobNotFound,
    JobOutcome,
    NotMigrated,
    RetryAfter,
    Snooze,
    StaleCallback,
    TerminalError,
    UniqueConflict,
    UnknownCallback,
    UnknownDatabase,
    UnknownJobKind,
    UnstorableAttempt,
    WaitForCallback,
    WaitTimeout,
)
from awa_django.job_record import JobRecord
from awa_django.ops import audit, descriptors, dlq, health, queues, runtimes
from awa_django.ops.actions import cancel, cancel_unique, retry, run_now
from awa_django.ops.job_waits import await_job, wait
from awa_django.ops.records import get_job, get_jobs, list_jobs
from awa_django.producer import cron
from awa_django.producer.cron import periodic
from awa_django.producer.enqueue import enqueue, enqueue_many, enqueue_on_commit, job

# Durable workflows (docs/workflows.md).
from awa_django.producer.workflows import (
    WorkflowBuilder as Workflow,  # the public name; ``awa_django.models.Workflow`` is the table's
)
from awa_django.producer.workflows import (
    WorkflowRun,
    WorkflowState,
    WorkflowTimeout,
    await_workflow,
    call,
    cancel_workflow,
    chain,
    chord,
    get_workflow,
    group,
    list_workflows,
    retry_workflow_step,
    wait_workflow,
)

__all__ = [
    "AttemptRescued",
    "AwaError",
    "CallbackError",
    "CallbackFailed",
    "Cancel",
    "ConfigError",
    "ConfirmationRequired",
    "DeadlineExceeded",
    "EnqueueOptions",
    "InvalidCallback",
    "InvalidJob",
    "InvalidSchedule",
    "Job",
    "JobContext",
    "JobFailed",
    "JobNotFound",
    "JobOutcome",
    "JobRecord",
    "NotMigrated",
    "PendingJob",
    "RetryAfter",
    "Snooze",
    "StaleCallback",
    "TerminalError",
    "Unique",
    "UniqueConflict",
    "UnknownCallback",
    "UnknownDatabase",
    "UnknownJobKind",
    "UnstorableAttempt",
    "WaitForCallback",
    "WaitTimeout",
    "Workflow",
    "WorkflowRun",
    "WorkflowState",
    "WorkflowTimeout",
    "audit",
    "await_job",
    "await_workflow",
    "call",
    "callback_url",
    "cancel",
    "cancel_unique",
    "cancel_workflow",
    "chain",
    "chord",
    "complete_external",
    "cron",
    "descriptors",
    "dlq",
    "enqueue",
    "enqueue_many",
    "enqueue_on_commit",
    "fail_external",
    "get_job",
    "get_jobs",
    "get_workflow",
    "group",
    "health",
    "heartbeat_callback",
    "job",
    "list_jobs",
    "list_workflows",
    "periodic",
    "queues",
    "resume_external",
    "retry",
    "retry_external",
    "retry_workflow_step",
    "run_now",
    "runtimes",
    "sign_callback",
    "wait",
    "wait_workflow",
]
