"""Django signals awa_django sends, and how the worker sends them; receivers live in the
user's code.

Every signal is sent after the write that caused it commits. ``sender`` is always
``awa_django.declarations.jobs.DeclaredJob`` (``awa.Job``). The worker-side signals
(completed, retried, snoozed, failed, rescued, and cancelled by a handler) are sent with
``asend_robust`` from the worker's event loop, so sync receivers run in a thread and a receiver
that raises is logged, never fatal to the worker; keep receivers cheap, they run on the
completion path. Every one of them has ``job_id``, ``run_lease``, ``kind``, ``queue`` and
``attempt`` (the attempt that just closed).
"""

from __future__ import annotations

import logging
from typing import Any

from django.dispatch import Signal

logger = logging.getLogger(__name__)

# Sent after the enqueueing transaction commits, with ``job_ids``, ``kind`` and ``queue``;
# ``sender`` is ``awa_django.declarations.jobs.DeclaredJob``. Never sent for a job that rolled back.
job_enqueued = Signal()

# The job completed: its handler returned. ``result`` is what was stored of its return value
# (decoded JSON; None when it returned None).
job_completed = Signal()

# An attempt failed and the job will run again at ``run_at``; ``error`` is the stored error entry.
job_retried = Signal()

# The handler snoozed, or the worker had no handler for the job's kind; the job runs again at
# ``run_at`` (neither uses up an attempt).
job_snoozed = Signal()

# The job failed for good (terminal error, attempts exhausted, no worker knowing its kind for
# UNKNOWN_KIND_TIMEOUT_S, or a rescue of its last attempt); ``error`` is the stored error entry.
job_failed = Signal()

# The job was cancelled, with ``reason``: by its handler (``awa.Cancel``), or through
# ``awa.cancel`` (sent on commit of the caller's transaction, never after a rollback).
job_cancelled = Signal()

# The leader closed an attempt its worker no longer reported on (``reason``: "heartbeat") or
# whose callback timed out ("callback_timeout"); ``outcome`` is "retryable" or "failed" (then
# ``job_failed`` is sent too).
job_rescued = Signal()

# A workflow reached its terminal state: ``workflow_id``, ``name`` and ``state`` ("completed",
# "failed" or "cancelled"). Sent once per workflow, after the commit of the transaction that
# ended it, by the closer that wrote it: the worker whose close of a step finished it (from
# its event loop, like the job signals), or ``awa.cancel_workflow`` (on commit of the
# caller's transaction). A workflow that a retried step resumes is sent again when it ends
# again. Not sent when a workflow ends by another path: see docs/workflows.md.
workflow_finished = Signal()


async def send_robust(signal: Signal, *, sender: type, **kwargs: Any) -> None:
    """Send ``signal`` from the worker's event loop (``sender`` is ``awa.Job``, which the
    caller passes: this module is below the one that declares it): a receiver that raises is
    logged with the job ids, and never stops the write path that sent it."""
    for receiver, result in await signal.asend_robust(sender=sender, **kwargs):
        if isinstance(result, Exception):
            logger.error(
                "signal receiver failed receiver=%r",
                receiver,
                exc_info=result,
                extra={key: kwargs[key] for key in ("job_id", "job_ids") if key in kwargs},
            )
