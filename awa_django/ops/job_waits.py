"""Waiting for a job to end: ``awa.wait`` (blocking) and ``awa.await_job`` (async).

A waiter works on a connection of its own, never Django's: it must LISTEN, and it must see the
job's commits whatever transaction the caller is in. It LISTENs on the channel the closers
notify, registers its session in ``awa.job_waiters`` (the closers notify only for jobs named
there, so a job nobody waits on ends silently), then reads the job's state, and reads it again
on each notification for the job. A completion whose closing statement began before the
registration committed sends nothing, and a notification can be lost with a broken connection:
the state is read again every ``FALLBACK_POLL_S`` in any case.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Final

import psycopg
from django.db import connections

from awa_django.conf import get_settings
from awa_django.declarations.pending_job import PendingJob
from awa_django.exceptions import JobFailed, JobNotFound, WaitTimeout
from awa_django.job_record import JobRecord
from awa_django.limits import delay_problem, is_job_id
from awa_django.ops.records import get_job
from awa_django.storage.connections import connect
from awa_django.storage.jobs import jobs_by_id
from awa_django.storage.statement import run_async
from awa_django.storage.waiters import (
    LISTEN_JOB_DONE,
    register_waiter,
    unregister_waiter,
)

# Seconds between reads of the state while no notification came: the bound on how late a
# waiter learns of a completion that raced its registration.
FALLBACK_POLL_S: Final = 1.0
# The states in which a job is over without having completed. Every other state but
# "completed" (waiting_external included: a parked attempt may still complete) keeps waiting.
FAILED_STATES: Final = frozenset({"failed", "cancelled", "dlq"})


def wait(job_id: int | PendingJob, *, timeout: float, database: str | None = None) -> JobRecord:
    """Block until job ``job_id`` (an id, or the ``PendingJob`` of ``enqueue_on_commit``) ends,
    for at most ``timeout`` seconds, and return its record if it completed. Raises ``JobFailed``
    if it failed, was cancelled or was dead-lettered, ``WaitTimeout`` if it had not ended in
    time, ``JobNotFound`` if no committed job has this id (one enqueued in the transaction still
    open on Django's connection included, and a ``PendingJob`` whose transaction has not
    committed: neither can end before that commits), ``ValueError`` for a bad timeout. Not for
    async code: use ``await_job``. ``database``: the alias of the job's queue (a queue's
    ``database``; job ids count per database), ``AWA["DATABASE_ALIAS"]`` when None."""
    job_id = _committed_id(job_id)
    try:
        return asyncio.run(await_job(job_id, timeout=timeout, database=database))
    except JobNotFound:
        alias = database or get_settings().DATABASE_ALIAS
        if connections[alias].in_atomic_block and get_job(job_id, database=alias) is not None:
            raise JobNotFound(
                f"job {job_id} is not committed: it was enqueued in the transaction still open "
                "here, and no worker can run it before that commits; wait for it after the "
                "commit (transaction.on_commit)",
                job_id=job_id,
            ) from None
        raise


def _committed_id(job: int | PendingJob) -> int:
    if not isinstance(job, PendingJob):
        return job
    if job.job_id is None:
        raise JobNotFound(
            f"the {job.kind} job of enqueue_on_commit is not enqueued: its transaction has not "
            "committed (or rolled back); wait for it after the commit",
            job_id=None,
        )
    return job.job_id


async def await_job(
    job_id: int | PendingJob, *, timeout: float, database: str | None = None
) -> JobRecord:
    """``wait`` for async code: the same outcomes, without blocking the event loop."""
    job_id = _committed_id(job_id)
    problem = delay_problem(timeout)
    if problem is not None:
        raise ValueError(f"timeout {problem}")
    if not is_job_id(job_id):
        raise JobNotFound(f"{job_id!r} is not a job id", job_id=job_id)
    deadline = time.monotonic() + timeout
    conf = get_settings()
    # AWA["WORKER_DATABASE"] stands for DATABASE_ALIAS alone (a session it needs for LISTEN).
    alias = conf.operator_database(database)
    conn = await connect((conf.WORKER_DATABASE or alias) if alias == conf.DATABASE_ALIAS else alias)
    try:
        await run_async(conn, LISTEN_JOB_DONE)
        await run_async(conn, register_waiter(job_id))
        try:
            return await _until_ended(conn, job_id, deadline, timeout)
        finally:
            # A broken connection ended the session: the next waiter deletes its row.
            with contextlib.suppress(psycopg.Error):
                await run_async(conn, unregister_waiter(job_id))
    finally:
        await conn.close()


async def _until_ended(
    conn: psycopg.AsyncConnection[Any], job_id: int, deadline: float, timeout: float
) -> JobRecord:
    payload = str(job_id)
    while True:
        found = await run_async(conn, jobs_by_id([job_id]))
        if not found:
            raise JobNotFound(f"no committed job has id {job_id}", job_id=job_id)
        (record,) = found
        if record.state == "completed":
            return record
        if record.state in FAILED_STATES:
            raise JobFailed(record)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WaitTimeout(record, timeout)
        # Closed explicitly: the generator holds the connection's lock until it is.
        notifies = conn.notifies(timeout=min(remaining, FALLBACK_POLL_S))
        async with contextlib.aclosing(notifies):
            async for notify in notifies:
                if notify.payload == payload:
                    break
