"""The audit trail: every operator action that took effect is a Django LogEntry, shown in the
admin's "Recent actions", naming the object and what was done; refused actions write none."""

from __future__ import annotations

from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.urls import reverse

import awa_django as awa
from tests.admin.test_dlq import dead_job
from tests.conftest import run_burst
from tests.jobs import noop

DLQ_ACT = "admin:awa_django_deadletter_act"
QUEUE_ACT = "admin:awa_django_queue_act"


def entries() -> list[tuple[str, str, str, int, str, str]]:
    """Every log entry, oldest first: (user, model, object id, flag, repr, message)."""
    return [
        (
            entry.user.username,
            ContentType.objects.get_for_id(entry.content_type_id).model,
            entry.object_id,
            entry.action_flag,
            entry.object_repr,
            entry.change_message,
        )
        for entry in LogEntry.objects.order_by("pk")
    ]


def test_job_cancel_and_retry_are_logged(operator_client):
    waiting = awa.enqueue("tests.noop", args={}, queue="email")
    failed = awa.enqueue("tests.always_fails", args={}, max_attempts=1)
    run_burst(queues={"default": 1})

    operator_client.post(reverse("admin:awa_django_job_cancel", args=[waiting]))
    operator_client.post(reverse("admin:awa_django_job_retry", args=[failed]))
    # An action that does nothing (the job already ended) leaves no entry.
    operator_client.post(reverse("admin:awa_django_job_cancel", args=[waiting]))

    assert entries() == [
        ("operator", "job", str(waiting), CHANGE, f"job {waiting}", "Cancelled."),
        ("operator", "job", str(failed), CHANGE, f"job {failed}", "Retried."),
    ]


def test_dlq_retry_and_purge_are_logged(operator_client):
    retried, moved, purged = dead_job(), dead_job(), dead_job()

    operator_client.post(reverse(DLQ_ACT), {"action": "retry", "job_ids": [retried]})
    operator_client.post(
        reverse(DLQ_ACT), {"action": "retry", "job_ids": [moved], "to_queue": "email"}
    )
    operator_client.post(reverse(DLQ_ACT), {"action": "purge", "job_ids": [purged]})  # asks
    operator_client.post(
        reverse(DLQ_ACT), {"action": "purge", "job_ids": [purged], "confirmed": "on"}
    )

    assert entries() == [
        ("operator", "deadletter", str(retried), CHANGE, f"dead-letter job {retried}", "Retried."),
        (
            "operator",
            "deadletter",
            str(moved),
            CHANGE,
            f"dead-letter job {moved}",
            "Retried to queue email.",
        ),
        (
            "operator",
            "deadletter",
            str(purged),
            DELETION,
            f"dead-letter job {purged}",
            "Purged from the dead-letter queue.",
        ),
    ]


def test_pause_resume_and_drain_are_logged_and_shown_in_recent_actions(operator_client):
    noop.enqueue_many([{"n": n} for n in range(3)])

    operator_client.post(reverse(QUEUE_ACT), {"action": "pause", "queue": "default"})
    operator_client.post(reverse(QUEUE_ACT), {"action": "resume", "queue": "default"})
    operator_client.post(reverse(QUEUE_ACT), {"action": "drain", "queue": "default"})  # asks
    operator_client.post(
        reverse(QUEUE_ACT), {"action": "drain", "queue": "default", "confirmed": "on"}
    )

    assert [(model, key, message) for _, model, key, _, _, message in entries()] == [
        ("queue", "default", "Paused."),
        ("queue", "default", "Resumed."),
        ("queue", "default", "Drained: 3 pending jobs cancelled."),
    ]
    index = operator_client.get(reverse("admin:index")).content.decode()
    recent = index[index.index("Recent actions") :]
    assert "default" in recent and "Queue health" in recent


def test_refused_actions_write_no_entry(viewer_client):
    job_id = dead_job()
    assert (
        viewer_client.post(reverse(DLQ_ACT), {"action": "retry", "job_ids": [job_id]}).status_code
        == 403
    )
    assert (
        viewer_client.post(reverse(QUEUE_ACT), {"action": "pause", "queue": "default"}).status_code
        == 403
    )
    assert not LogEntry.objects.exists()
