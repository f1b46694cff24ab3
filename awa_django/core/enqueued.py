"""What follows an enqueue's commit: the telemetry count and the ``job_enqueued`` signal, for
the producer and for the operator actions that enqueue (a cron trigger)."""

from __future__ import annotations

from functools import partial

from django.db import connections

from awa_django.declarations.jobs import DeclaredJob
from awa_django.signals import job_enqueued
from awa_django.telemetry import get_telemetry


def announce_enqueued(
    alias: str, job_ids: list[int], *, kind: str, queue: str, committed: bool = False
) -> None:
    """Count jobs enqueued in the current transaction of ``alias`` and send ``job_enqueued``
    for them, both once it commits (never for jobs that rolled back). ``committed`` says the
    statement that wrote them was its own transaction (autocommit) and has committed: both
    happen now, as ``on_commit`` would do them, without looking the connection up again."""
    if not job_ids:
        return
    telemetry = get_telemetry()
    if telemetry.enabled:
        count = partial(telemetry.enqueued, kind=kind, queue=queue, count=len(job_ids))
        if committed:
            count()
        else:
            connections[alias].on_commit(count)
    # ``receivers`` first, as Django's own ``send`` does: with none connected, the usual case,
    # ``has_listeners`` would look up the sender's receivers for nothing.
    if job_enqueued.receivers and job_enqueued.has_listeners():
        # send_robust: the jobs are committed by now, so a receiver that raises is logged
        # (by Django) instead of failing the caller's commit or starving the other receivers.
        send = partial(
            job_enqueued.send_robust, sender=DeclaredJob, job_ids=job_ids, kind=kind, queue=queue
        )
        if committed:
            send()
        else:
            connections[alias].on_commit(send)
