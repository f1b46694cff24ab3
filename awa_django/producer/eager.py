"""Eager mode (``AWA["EAGER"]``): a job runs in the enqueueing process once its transaction
commits, through the in-process runner (the worker's claim, execute and close path).

Never inside the uncommitted transaction: the run is a ``transaction.on_commit`` callback, so a
rollback discards it with the job. A failed attempt is retried at once, without backoff, until
the job completes or runs out of attempts; snoozed and future-dated jobs stay scheduled for a
worker (or ``awa_django.testing.run_jobs``). A job's exception is logged and stored like a
worker's; with ``AWA["EAGER_RAISE"]`` the exception of a job that failed for good is re-raised
from the commit as well (see docs/testing.md#eager-mode).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Protocol

from django.db import transaction

from awa_django.conf import get_settings
from awa_django.core.outcome import Outcome
from awa_django.declarations.discovery import ensure_jobs_discovered


class EagerAttempt(Protocol):
    """One attempt the in-process runner made."""

    @property
    def outcome(self) -> Outcome: ...

    @property
    def error(self) -> BaseException | None: ...


def run_after_commit(alias: str, queue: str, job_ids: Sequence[int]) -> None:
    """Run ``job_ids`` (ready jobs of ``queue``) here when ``alias``'s transaction commits."""
    transaction.on_commit(partial(_run, queue, tuple(job_ids)), using=alias)


def _run(queue: str, job_ids: tuple[int, ...]) -> None:
    # Imported on the first eager run: a process that never runs a job eagerly never loads
    # the worker.
    from awa_django.worker.in_process import InProcessRunner

    ensure_jobs_discovered()
    runner = InProcessRunner(database=get_settings().queue_database(queue))
    ran: Sequence[EagerAttempt] = runner.run_eagerly(queue, job_ids)
    if not get_settings().EAGER_RAISE:
        return
    for attempt in ran:
        if attempt.outcome is Outcome.FAILED and attempt.error is not None:
            raise attempt.error
