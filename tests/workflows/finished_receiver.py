"""A ``workflow_finished`` receiver for worker subprocesses (loaded through AWA_JOB_MODULES):
each signal becomes a row of ``tests_job_runs`` (job_id = the workflow's id, note =
``finished:<state>:<name>``), so a test counts the signals across processes."""

from __future__ import annotations

from typing import Any

from django.db import connection

from awa_django.signals import workflow_finished


def record_finished(sender: object, *, workflow_id: int, name: str, state: str, **_: Any) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO tests_job_runs (job_id, run_lease, attempt, note) VALUES (%s, 0, 0, %s)",
            [workflow_id, f"finished:{state}:{name}"],
        )


workflow_finished.connect(record_finished, dispatch_uid="tests.workflows.finished_receiver")
