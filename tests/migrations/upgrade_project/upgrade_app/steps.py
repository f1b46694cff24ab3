"""The upgrade test's steps, run with ``manage.py shell -c`` by the released or the current code;
each prints what the test needs as one JSON line."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from django.db import transaction

import awa_django as awa
from upgrade_app import jobs


def emit(value: object) -> None:
    print(json.dumps(value))


def settled_jobs() -> None:
    """Jobs that finish (or park, or wait for a retry) before the upgrade."""
    with transaction.atomic():
        ids = {
            "completed": [jobs.quick.enqueue(n=n) for n in range(3)],
            "failed": [jobs.broken.enqueue()],
            "dlq": [jobs.doomed.enqueue()],
            "parked": [jobs.payment.enqueue()],
            "retryable": [jobs.flaky.enqueue()],
        }
    emit(ids)


def pending_jobs() -> None:
    """Jobs waiting when the upgrade starts, and the one the released worker holds."""
    with transaction.atomic():
        ids = {
            "available": [jobs.quick.enqueue(n=n) for n in range(20)],
            "scheduled": [awa.enqueue(jobs.quick, args={"n": 99}, run_at=timedelta(seconds=4))],
            "unique": [jobs.refresh.enqueue(user_id=7)],
            "running": [jobs.blocker.enqueue()],
        }
    emit(ids)


def spread_jobs() -> None:
    """Jobs of the current code in more lanes of the default queue than 0.1.0 could use (the
    lanes of django.tasks priorities), so its claims go by lane marks: the 0.1.0 lanes are
    among them."""
    from awa_django.declarations.enqueue_options import EnqueueOptions
    from awa_django.producer.enqueue import enqueue_at_lane_priority

    with transaction.atomic():
        ids = [
            enqueue_at_lane_priority(
                jobs.quick, args={"n": 100 + priority}, options=EnqueueOptions(priority=priority)
            )
            for priority in (-20, 5, 7, 9, 30, 60)
        ]
    emit(ids)


def a_workflow() -> None:
    """A chord of the current code (migration 0013): two steps and a callback held until both
    complete."""
    with transaction.atomic():
        run = awa.chord(
            [awa.call(jobs.quick, n=201), awa.call(jobs.quick, n=202)], awa.call(jobs.quick, n=203)
        ).enqueue()
    emit({"id": run.workflow_id, "jobs": list(run.job_ids.values())})


def workflow_state(workflow_id: int) -> None:
    state = awa.get_workflow(workflow_id)
    emit(None if state is None else state.state)


def states(job_ids: list[int]) -> None:
    emit({str(record.job_id): record.state for record in awa.get_jobs(job_ids)})


def complete_parked(state_dir: str) -> None:
    token = (Path(state_dir) / "callback.token").read_text()
    emit(awa.complete_external(token, {"paid": True}))


def trigger_cron() -> None:
    names = [schedule.name for schedule in awa.cron.list()]
    fired = awa.cron.trigger(names[0]) if names else None
    # Migration 0015 keeps each schedule's recent fires, triggers included.
    history = [fire.job_id for fire in awa.cron.recent_fires().get(names[0], [])] if names else []
    emit({"schedules": names, "fired": fired, "history": history})


def unique_conflict() -> None:
    """While the unique job is queued or running, a second one is refused."""
    try:
        jobs.refresh.enqueue(user_id=7)
    except awa.UniqueConflict:
        emit("conflict")
    else:
        emit("enqueued")


def nobody_knows() -> None:
    """(Current code only: 0.1.0 knows no AWA["EXTERNAL_KINDS"].) A job of another service's
    kind, which no worker of this project has a handler for."""
    from django.conf import settings
    from django.test import override_settings

    with override_settings(AWA={**settings.AWA, "EXTERNAL_KINDS": ["elsewhere.*"]}):
        emit(awa.enqueue("elsewhere.kind", args={}, max_attempts=1))


def record(job_id: int) -> None:
    job = awa.get_job(job_id)
    emit({"state": job.state, "attempt": job.attempt, "errors": [e["type"] for e in job.errors]})
