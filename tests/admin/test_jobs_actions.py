"""Run now (one job, ticked rows), retry of ticked rows, and actions on everything a state search
matches (cancel, run now, retry): count confirmed first, bounded batches, re-runnable,
permissions, audit log."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

import awa_django as awa
from awa_django.admin import jobs
from awa_django.signals import job_cancelled
from tests.admin.test_dlq import messages_of
from tests.admin.test_hot_lane import hot_lane
from tests.conftest import BackgroundWorker, run_burst, wait_until

LIST = "admin:awa_django_job_changelist"
MATCHING = "admin:awa_django_job_act_matching"
RUN_NOW_SELECTED = "admin:awa_django_job_run_now_selected"
RETRY_SELECTED = "admin:awa_django_job_retry_selected"


def run_now_url(job_id: int) -> str:
    return reverse("admin:awa_django_job_run_now", args=[job_id])


def scheduled(count: int, **options) -> list[int]:
    return [
        awa.enqueue("tests.noop", args={"n": n}, run_at=timedelta(hours=1), **options)
        for n in range(count)
    ]


def test_run_now_from_the_detail_page(operator_client):
    (job_id,) = scheduled(1)
    page = operator_client.get(reverse("admin:awa_django_job_change", args=[job_id]))
    assert b'id="run-now-job"' in page.content

    done = operator_client.post(run_now_url(job_id), follow=True)
    assert messages_of(done) == [f"Job {job_id} runs now."]
    assert awa.get_job(job_id).state == "available"
    entry = LogEntry.objects.get()
    assert (entry.object_id, entry.change_message) == (str(job_id), "Run now.")

    again = operator_client.post(run_now_url(job_id), follow=True)
    assert messages_of(again) == [
        f"Job {job_id} was not run now: it is no longer scheduled or retryable."
    ]
    assert LogEntry.objects.count() == 1


def test_run_now_of_a_retryable_job_keeps_its_attempt(operator_client):
    job_id = awa.enqueue("tests.always_fails", args={}, max_attempts=3)
    run_burst()
    before = awa.get_job(job_id)
    assert before.state == "retryable"
    assert awa.run_now(job_id) is True
    after = awa.get_job(job_id)
    assert (after.state, after.attempt, after.run_lease) == (
        "available",
        before.attempt,
        before.run_lease,
    )
    assert after.run_at <= before.run_at


def test_run_now_in_a_paused_queue_waits_there(operator_client):
    (job_id,) = scheduled(1, queue="email")
    awa.queues.pause("email")
    assert awa.run_now(job_id) is True
    assert awa.get_job(job_id).state == "available"
    page = operator_client.get(reverse(LIST), {"queue": "email"})
    assert page.status_code == 200


def test_run_now_refuses_other_states_and_impossible_ids(awa_db):
    waiting = awa.enqueue("tests.noop", args={})
    assert awa.run_now(waiting) is False
    assert awa.run_now(2**63) is False and awa.run_now(0) is False


def test_run_ticked_rows_now(operator_client):
    first, second = scheduled(2)
    waiting = awa.enqueue("tests.noop", args={})
    done = operator_client.post(
        reverse(RUN_NOW_SELECTED),
        {"job_ids": [first, second, waiting], "return_query": "state=scheduled"},
    )
    assert done.status_code == 302 and done["Location"].endswith("?state=scheduled")
    assert {awa.get_job(j).state for j in (first, second)} == {"available"}
    assert LogEntry.objects.count() == 2


def test_run_all_matching_now_confirms_then_works_in_batches(operator_client, monkeypatch):
    monkeypatch.setattr(jobs, "BULK_BATCH_SIZE", 7)
    email = scheduled(20, queue="email")
    other = scheduled(3)
    page = operator_client.get(reverse(LIST), {"state": "scheduled", "queue": "EM"})
    assert b"jobs-run-now-matching" in page.content and b"jobs-cancel-matching" in page.content

    search = {"action": "run_now", "state": "scheduled", "queue": "EM"}
    confirm = operator_client.post(reverse(MATCHING), search)
    assert confirm.context["count"] == 20
    assert "Yes, run now 20 jobs" in confirm.content.decode()
    assert {awa.get_job(j).state for j in email} == {"scheduled"}  # nothing yet

    done = operator_client.post(
        reverse(MATCHING), {**search, "counted": "20", "confirmed": "on"}, follow=True
    )
    assert messages_of(done) == ["Ran 20 jobs now matching state=scheduled, queue=EM."]
    assert {awa.get_job(j).state for j in email} == {"available"}
    assert {awa.get_job(j).state for j in other} == {"scheduled"}
    entry = LogEntry.objects.get()
    assert entry.object_id is None and entry.action_flag == CHANGE
    assert entry.object_repr == "jobs matching state=scheduled, queue=EM"

    again = operator_client.post(
        reverse(MATCHING), {**search, "counted": "20", "confirmed": "on"}, follow=True
    )
    assert messages_of(again) == [
        "Ran 0 of the 20 jobs counted now matching state=scheduled, queue=EM."
    ]


def test_cancel_all_matching(operator_client, monkeypatch):
    monkeypatch.setattr(jobs, "BULK_BATCH_SIZE", 4)
    waiting = [awa.enqueue("tests.noop", args={}) for _ in range(9)]
    search = {"action": "cancel", "state": "available"}
    assert operator_client.post(reverse(MATCHING), search).context["count"] == 9
    done = operator_client.post(reverse(MATCHING), {**search, "confirmed": "on"}, follow=True)
    assert messages_of(done) == ["Cancelled 9 jobs matching state=available."]
    assert {awa.get_job(j).state for j in waiting} == {"cancelled"}


def test_cancel_all_matching_costs_a_few_statements_per_page_not_per_job(operator_client):
    """A bulk cancel's page of 1,000 jobs is cancelled in one transaction of one statement;
    each job's own transaction cost one statement (and a commit) per job (issue #36)."""
    ids = awa.enqueue_many("tests.noop", [{"n": n} for n in range(2_500)], queue="partners")
    awa.enqueue("tests.noop", args={}, run_at=timedelta(hours=1), queue="partners")
    received: list[int] = []

    def receiver(sender: object, job_id: int, **kwargs: object) -> None:
        received.append(job_id)

    search = {"action": "cancel", "state": "available", "confirmed": "on"}
    job_cancelled.connect(receiver)
    try:
        with CaptureQueriesContext(connection) as statements:
            done = operator_client.post(reverse(MATCHING), search, follow=True)
    finally:
        job_cancelled.disconnect(receiver)
    assert messages_of(done) == ["Cancelled 2,500 jobs matching state=available."]
    # Three pages of ids (1,000, 1,000, 500), each read in one transaction and cancelled in
    # another of one statement (and one read for the signals), and the page the redirect
    # shows: not a transaction per job.
    sql = [query["sql"] for query in statements.captured_queries]
    assert sql.count("BEGIN") <= 8, sql.count("BEGIN")
    assert len(sql) <= 50, len(sql)
    assert sorted(received) == sorted(ids)
    with connection.cursor() as cursor:
        cursor.execute("SELECT state, count(*) FROM awa.jobs GROUP BY state ORDER BY state")
        assert cursor.fetchall() == [("cancelled", 2_500), ("scheduled", 1)]
    (entry,) = LogEntry.objects.all()
    assert entry.change_message == "Cancelled 2,500 jobs matching state=available."


def test_retry_all_matching_costs_a_few_statements_per_page_not_per_job(
    operator_client, monkeypatch
):
    """A bulk retry's page of failed jobs is retried in one transaction of a few statements;
    each job's own transaction cost four (issue #36: 209 statements for 50 jobs)."""
    monkeypatch.setattr(jobs, "BULK_BATCH_SIZE", 40)
    hot_lane(81, still_open=1, outcome="failed")
    search = {"action": "retry", "state": "failed", "confirmed": "on"}
    with CaptureQueriesContext(connection) as statements:
        done = operator_client.post(reverse(MATCHING), search, follow=True)
    assert messages_of(done) == ["Retried 80 jobs matching state=failed."]
    # Three pages of ids (40, 40, none), each with its retries: far below one per job.
    assert len(statements) <= 40, len(statements)
    with connection.cursor() as cursor:
        cursor.execute("SELECT state, count(*) FROM awa.jobs GROUP BY state ORDER BY state")
        assert cursor.fetchall() == [("available", 80), ("running", 1)]


def test_retry_all_matching_failed_jobs(operator_client, monkeypatch):
    monkeypatch.setattr(jobs, "BULK_BATCH_SIZE", 2)
    failed = [awa.enqueue("tests.terminal") for _ in range(5)]
    run_burst()
    assert {awa.get_job(j).state for j in failed} == {"failed"}
    page = operator_client.get(reverse(LIST), {"state": "failed"})
    assert b"jobs-retry-matching" in page.content
    assert b"jobs-cancel-matching" not in page.content  # failed jobs cannot be cancelled

    search = {"action": "retry", "state": "failed", "kind": "tests.term"}
    confirm = operator_client.post(reverse(MATCHING), search)
    assert confirm.context["count"] == 5 and "Yes, retry 5 jobs" in confirm.content.decode()
    done = operator_client.post(
        reverse(MATCHING), {**search, "counted": "5", "confirmed": "on"}, follow=True
    )
    assert messages_of(done) == ["Retried 5 jobs matching state=failed, kind=tests.term."]
    retried = [awa.get_job(j) for j in failed]
    assert {(job.state, job.attempt, len(job.errors)) for job in retried} == {("available", 0, 1)}
    entry = LogEntry.objects.get()
    assert entry.object_repr == "jobs matching state=failed, kind=tests.term"

    again = operator_client.post(
        reverse(MATCHING), {**search, "counted": "5", "confirmed": "on"}, follow=True
    )
    assert messages_of(again) == [
        "Retried 0 of the 5 jobs counted matching state=failed, kind=tests.term."
    ]


def test_an_action_on_a_state_it_cannot_change_is_a_form_error(operator_client):
    scheduled(1)
    refused = operator_client.post(
        reverse(MATCHING),
        {"action": "run_now", "state": "available", "confirmed": "on"},
        follow=True,
    )
    assert any("run_now acts on jobs that are" in m for m in messages_of(refused))
    missing = operator_client.post(reverse(MATCHING), {"action": "cancel"}, follow=True)
    assert any(m.startswith("state:") for m in messages_of(missing))
    assert not LogEntry.objects.exists()


def test_view_only_staff_get_403_on_every_new_action(viewer_client):
    (job_id,) = scheduled(1)
    page = viewer_client.get(reverse(LIST), {"state": "scheduled"})
    assert page.status_code == 200
    assert b"jobs-run-now-matching" not in page.content and b"jobs-run-now" not in page.content
    detail = viewer_client.get(reverse("admin:awa_django_job_change", args=[job_id]))
    assert b"run-now-job" not in detail.content
    posts = [
        (run_now_url(job_id), {}),
        (reverse(RUN_NOW_SELECTED), {"job_ids": [job_id]}),
        (reverse(MATCHING), {"action": "run_now", "state": "scheduled", "confirmed": "on"}),
        (reverse(MATCHING), {"action": "cancel", "state": "scheduled", "confirmed": "on"}),
        (reverse(MATCHING), {"action": "retry", "state": "failed", "confirmed": "on"}),
    ]
    for url, data in posts:
        assert viewer_client.post(url, data).status_code == 403
    assert awa.get_job(job_id).state == "scheduled" and not LogEntry.objects.exists()


def test_new_actions_need_csrf(operator_client):
    (job_id,) = scheduled(1)
    client = Client(enforce_csrf_checks=True)
    client.force_login(User.objects.get(username="operator"))
    assert client.post(run_now_url(job_id)).status_code == 403
    refused = client.post(
        reverse(MATCHING), {"action": "run_now", "state": "scheduled", "confirmed": "on"}
    )
    assert refused.status_code == 403
    assert awa.get_job(job_id).state == "scheduled"


def failed_on_email(count: int) -> list[int]:
    job_ids = [awa.enqueue("tests.terminal", queue="email") for _ in range(count)]
    run_burst(queues={"email": 1})
    assert {awa.get_job(j).state for j in job_ids} == {"failed"}
    return job_ids


def test_retry_ticked_rows_with_one_summary_message(operator_client):
    *failed, dead = failed_on_email(3)
    assert awa.dlq.move_failed(job_ids=[dead]) == 1
    running = awa.enqueue("tests.slow_first", args={"seconds": 30}, queue="email")
    # One slot, held by the slow job: the retried jobs wait in the lane instead of failing again.
    worker = BackgroundWorker(maintenance=False, queues={"email": 1}).start()
    try:
        wait_until(lambda: awa.get_job(running).state == "running")
        page = operator_client.get(reverse(LIST), {"queue": "email"})
        assert b'id="jobs-retry"' in page.content
        for job_id in [*failed, dead, running]:
            assert f'id="select-{job_id}"'.encode() in page.content

        done = operator_client.post(
            reverse(RETRY_SELECTED),
            {"job_ids": [*failed, dead, running], "return_query": "queue=email"},
            follow=True,
        )

        assert done.redirect_chain[-1][0] == reverse(LIST) + "?queue=email"
        assert messages_of(done) == [
            "Retried 3 jobs; skipped 1 that is not failed, cancelled or dead."
        ]
        retried = awa.get_jobs([*failed, dead])
        assert {(job.state, job.attempt, len(job.errors)) for job in retried} == {
            ("available", 0, 1)
        }
        assert awa.get_job(running).state == "running"
        entries = LogEntry.objects.all()
        assert sorted(int(e.object_id) for e in entries) == sorted([*failed, dead])
        assert {e.change_message for e in entries} == {"Retried."}
    finally:
        awa.cancel(running)
        worker.stop()


def test_retry_of_ticked_rows_that_cannot_be_retried_warns_once(operator_client):
    waiting = awa.enqueue("tests.noop", args={})
    done = operator_client.post(reverse(RETRY_SELECTED), {"job_ids": [waiting]}, follow=True)
    assert messages_of(done) == ["Retried 0 jobs; skipped 1 that is not failed, cancelled or dead."]
    (failed,) = failed_on_email(1)
    again = operator_client.post(reverse(RETRY_SELECTED), {"job_ids": [failed]}, follow=True)
    assert messages_of(again) == ["Retried 1 job."]
    assert awa.get_job(waiting).state == "available" and LogEntry.objects.count() == 1


def test_retry_of_ticked_rows_refuses_more_than_a_page(operator_client):
    failed = failed_on_email(1)
    too_many = operator_client.post(
        reverse(RETRY_SELECTED), {"job_ids": [*failed, *range(1, jobs.PAGE_SIZE + 1)]}, follow=True
    )
    assert messages_of(too_many) == [f"Select at most {jobs.PAGE_SIZE} jobs at a time."]
    assert awa.get_job(failed[0]).state == "failed" and not LogEntry.objects.exists()


def test_retry_of_ticked_rows_needs_change_permission(viewer_client):
    failed = failed_on_email(2)
    page = viewer_client.get(reverse(LIST), {"state": "failed"})
    assert page.status_code == 200
    assert b"jobs-retry" not in page.content and b'id="select-' not in page.content
    assert viewer_client.post(reverse(RETRY_SELECTED), {"job_ids": failed}).status_code == 403
    assert {job.state for job in awa.get_jobs(failed)} == {"failed"}
    assert not LogEntry.objects.exists()


def test_retry_of_ticked_rows_needs_csrf(operator_client):
    failed = failed_on_email(1)
    client = Client(enforce_csrf_checks=True)
    client.force_login(User.objects.get(username="operator"))
    assert client.post(reverse(RETRY_SELECTED), {"job_ids": failed}).status_code == 403
    assert awa.get_job(failed[0]).state == "failed" and not LogEntry.objects.exists()
