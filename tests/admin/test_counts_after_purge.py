"""After dead letters are purged, a state's count and its list agree (issue #36): the purged
jobs' failed closures, which the ring keeps until prune, are counted nowhere, and "Retry all
matching" confirms and reports the jobs that exist."""

from __future__ import annotations

from typing import Any

from django.contrib.admin.models import LogEntry
from django.db import connection
from django.urls import reverse

import awa_django as awa
from awa_django.storage.browse import JobFilter, count_in_state, list_jobs
from awa_django.storage.statement import run_read
from tests.admin.test_dlq import messages_of
from tests.admin.test_filter_indexes import dead_letters, explain_each, rows_read
from tests.admin.test_hot_lane import hot_lane, nodes
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


# Failed closures of one pair, more than a pair walks down its own ready rows: each moved to
# the DLQ, a fifth of them then purged; and more DLQ entries than closures, as entries whose
# ring slot was pruned leave (issue #36's production shape, at a scale of seconds).
FAILED = 2_500
PRUNED_DEAD_LETTERS = 5_000


def test_failed_pages_probe_the_purge_markers_one_by_one(operator_client):
    """Behind the pair's filter and the anti-join with the DLQ, the planner expected one
    closure where thousands came, and joined the purge markers by a nested loop over a
    sequential scan of them, once per closure: every marker read for every closure."""
    hot_lane(FAILED + 1, still_open=1, outcome="failed")
    with connection.cursor() as cursor:
        cursor.execute("SELECT job_id FROM awa.done_entries WHERE outcome = 'failed'")
        failed = sorted(row[0] for row in cursor.fetchall())
        cursor.execute(
            "SELECT count(*) FROM awa.dlq_move(%s, ARRAY['failed'], 'moved_from_failed')",
            [failed],
        )
        assert cursor.fetchone()[0] == FAILED
        cursor.execute("SELECT count(*) FROM awa.dlq_purge(%s)", [failed[::5]])
        assert cursor.fetchone()[0] == FAILED // 5
    dead_letters(
        PRUNED_DEAD_LETTERS, error_type="builtins.KeyError", kind="mail.send", reason="pruned"
    )
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    where = JobFilter(kind="tests.noop", state="failed")
    for read in (
        list_jobs(where=where, before=None, limit=50, count=True),
        count_in_state("failed", where),
    ):
        # A probe by job id reads at most one marker per closure walked.
        markers = [rows_read(root, "purged_jobs") for root in explain_each(read)]
        assert max(markers) <= FAILED, markers
    with connection.cursor() as cursor:
        page = run_read(cursor, list_jobs(where=where, before=None, limit=50, count=True))
        assert page.jobs == [] and page.count == 0
        assert run_read(cursor, count_in_state("failed", where)) == 0
    listed = operator_client.get(reverse(LIST), {"kind": "tests.noop", "state": "failed"})
    assert listed.context["state_count"] == 0


def probes(root: dict[str, Any], *tables: str) -> int:
    """How many times the plan's scans of ``tables`` ran: once for a walk, once per probe."""
    return sum(node["Actual Loops"] for node in nodes(root) if node.get("Relation Name") in tables)


def test_a_failed_page_walks_the_dead_letters_once_not_per_closure(operator_client):
    """A page of failed jobs below thousands of failed closures whose jobs moved to the DLQ
    (a fifth purged from it since) reads the DLQ and the purge markers once each, in step with
    the closures, instead of probing both for every closure it passes (issue #36: 50,050
    probes at a million jobs)."""
    still = failed_then_purged(failed=3, purged=0)
    hot_lane(FAILED + 1, still_open=1, outcome="failed")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT job_id FROM awa.done_entries WHERE outcome = 'failed' AND job_id <> ALL(%s)",
            [still],
        )
        moved = sorted(row[0] for row in cursor.fetchall())
        cursor.execute(
            "SELECT count(*) FROM awa.dlq_move(%s, ARRAY['failed'], 'moved_from_failed')",
            [moved],
        )
        assert cursor.fetchone()[0] == FAILED
        cursor.execute("SELECT count(*) FROM awa.dlq_purge(%s)", [moved[::5]])
        assert cursor.fetchone()[0] == FAILED // 5
        cursor.execute("VACUUM ANALYZE")
    where = JobFilter(state="failed")
    read = list_jobs(where=where, before=None, limit=50)
    passed = max(probes(root, "dlq_entries", "purged_jobs") for root in explain_each(read))
    # The walk of each, and a probe of each for the few closures kept (closure_is_newest).
    assert passed <= 20, passed
    with connection.cursor() as cursor:
        page = run_read(cursor, list_jobs(where=where, before=None, limit=50, count=True))
        assert [job.job_id for job in page.jobs] == sorted(still, reverse=True)
        assert page.count == 3
        # From a cursor among the moved closures, and from one among the failed jobs.
        below = run_read(cursor, list_jobs(where=where, before=moved[FAILED // 2], limit=2))
        assert [job.job_id for job in below.jobs] == sorted(still, reverse=True)[:2]
        last = run_read(cursor, list_jobs(where=where, before=max(still), limit=50))
        assert [job.job_id for job in last.jobs] == sorted(still, reverse=True)[1:]
