"""After dead letters are purged, a state's count and its list agree (issue #36): the purged
jobs' failed closures, which the ring keeps until prune, are counted nowhere, and "Retry all
matching" confirms and reports the jobs that exist."""

from __future__ import annotations

from django.contrib.admin.models import LogEntry
from django.db import connection
from django.urls import reverse

import awa_django as awa
from awa_django.storage.browse import JobFilter, count_in_state
from awa_django.storage.statement import run_read
from tests.admin.test_dlq import messages_of
from tests.conftest import run_burst

LIST = "admin:awa_django_job_changelist"
MATCHING = "admin:awa_django_job_act_matching"


def failed_then_purged(failed: int, purged: int, *, kind: str = "tests.always_fails") -> list[int]:
    """``failed + purged`` jobs failed for good; ``purged`` of them moved to the DLQ and purged
    from it. Answers the ids still failed."""
    ids = [awa.enqueue(kind, args={}, max_attempts=1) for _ in range(failed + purged)]
    run_burst()
    dead = ids[:purged]
    assert awa.dlq.move_failed(job_ids=dead) == purged
    assert all(awa.dlq.purge(job_id) for job_id in dead)
    return ids[purged:]


def test_failed_count_leaves_out_purged_jobs(operator_client):
    still = failed_then_purged(failed=3, purged=4)
    with connection.cursor() as cursor:
        assert run_read(cursor, count_in_state("failed", JobFilter())) == 3
        # The kind filter reads the pair's ready rows, another query: the same answer.
        assert run_read(cursor, count_in_state("failed", JobFilter(kind="tests.always"))) == 3
    page = operator_client.get(reverse(LIST), {"state": "failed"})
    assert sorted(job.job_id for job in page.context["jobs"]) == sorted(still)
    assert page.context["state_count"] == 3


def test_retry_all_matching_confirms_and_reports_the_true_count(operator_client):
    still = failed_then_purged(failed=2, purged=3)
    search = {"action": "retry", "state": "failed"}
    confirm = operator_client.post(reverse(MATCHING), search)
    assert confirm.context["count"] == 2
    done = operator_client.post(
        reverse(MATCHING), {**search, "counted": "2", "confirmed": "on"}, follow=True
    )
    (message,) = messages_of(done)
    assert message.startswith("Retried 2 jobs ")
    assert LogEntry.objects.get().change_message == message
    assert {awa.get_job(job_id).state for job_id in still} == {"available"}
