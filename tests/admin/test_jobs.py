"""The jobs page: search across states, keyset pages, detail, cancel, permissions."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.db import connection
from django.urls import reverse

import awa_django as awa
from tests.conftest import BackgroundWorker, job_no_worker_knows, run_burst, wait_until
from tests.jobs import noop, returns_value

LIST = "admin:awa_django_job_changelist"


def detail_url(job_id: int) -> str:
    return reverse("admin:awa_django_job_change", args=[job_id])


def cancel_url(job_id: int) -> str:
    return reverse("admin:awa_django_job_cancel", args=[job_id])


def listed_ids(response) -> list[int]:
    return [job.job_id for job in response.context["jobs"]]


def test_list_shows_every_state_newest_first(operator_client):
    done = awa.enqueue("tests.noop", args={}, queue="default")
    run_burst()
    failed = awa.enqueue("tests.always_fails", args={}, max_attempts=1)
    run_burst()
    scheduled = awa.enqueue("tests.noop", args={}, run_at=timedelta(hours=1))
    waiting = awa.enqueue("tests.noop", args={}, queue="email")

    response = operator_client.get(reverse(LIST))

    assert response.status_code == 200
    assert listed_ids(response) == [waiting, scheduled, failed, done]
    states = {job.job_id: job.state for job in response.context["jobs"]}
    assert states == {
        waiting: "available",
        scheduled: "scheduled",
        failed: "failed",
        done: "completed",
    }
    assert b"tests.always_fails" in response.content


def test_search_by_state_kind_queue_and_id(operator_client):
    done = awa.enqueue("tests.noop", args={})
    run_burst()
    failed = awa.enqueue("tests.always_fails", args={}, max_attempts=1)
    run_burst()
    scheduled = awa.enqueue("tests.noop", args={}, run_at=timedelta(hours=1))
    email = awa.enqueue("tests.record", args={}, queue="email")
    url = reverse(LIST)

    assert listed_ids(operator_client.get(url, {"state": "completed"})) == [done]
    assert listed_ids(operator_client.get(url, {"state": "failed"})) == [failed]
    assert listed_ids(operator_client.get(url, {"state": "scheduled"})) == [scheduled]
    assert listed_ids(operator_client.get(url, {"state": "available"})) == [email]
    assert listed_ids(operator_client.get(url, {"kind": "tests.noop"})) == [scheduled, done]
    assert listed_ids(operator_client.get(url, {"queue": "email"})) == [email]
    assert listed_ids(operator_client.get(url, {"job_id": failed})) == [failed]
    assert listed_ids(operator_client.get(url, {"job_id": 10**12})) == []


def test_invalid_search_names_the_field(operator_client):
    response = operator_client.get(reverse(LIST), {"state": "bogus", "job_id": "x"})
    assert response.status_code == 200
    assert response.context["jobs"] == []
    assert set(response.context["form"].errors) == {"state", "job_id"}


def test_an_id_past_bigint_is_a_form_error_in_the_search(operator_client):
    for field in ("job_id", "before"):
        response = operator_client.get(reverse(LIST), {field: str(2**63)})
        assert response.status_code == 200
        assert response.context["jobs"] == []
        assert set(response.context["form"].errors) == {field}


@pytest.mark.parametrize("job_id", [str(2**63), str(10**30), "0", "0" * 5000 + "1", "x"])
@pytest.mark.parametrize("action", ["", "cancel/", "retry/"])
def test_detail_and_action_urls_of_an_impossible_id_are_404(operator_client, job_id, action):
    url = f"{reverse(LIST)}{job_id}/{action}"
    response = operator_client.post(url) if action else operator_client.get(url)
    assert response.status_code == 404


def test_pages_follow_the_cursor_without_overlap(operator_client):
    ids = [awa.enqueue("tests.noop", args={"n": n}) for n in range(120)]
    seen: list[int] = []
    url = reverse(LIST)
    query: dict[str, object] = {}
    while True:
        response = operator_client.get(url, query)
        seen.extend(listed_ids(response))
        if response.context["next_query"] is None:
            break
        query = dict(pair.split("=") for pair in response.context["next_query"].split("&"))
    assert seen == sorted(ids, reverse=True)


def test_list_query_count_is_constant_at_1000_jobs(operator_client, django_assert_num_queries):
    noop.enqueue_many([{"n": n} for n in range(1000)])
    url = reverse(LIST)
    # Session and user, the statement time limit (set, then put back), then the listing's
    # transaction (BEGIN, its planner setting, COMMIT), the id window and its hydration, and
    # the two of the form's suggestions (names, error types): no count, no query per row.
    with django_assert_num_queries(11):
        response = operator_client.get(url)
    assert len(response.context["jobs"]) == 50
    # With a state and a kind: the (queue, kind) pairs the kind matches, the state's ids (the
    # pair's size, then its ids: few ready rows walked whole, many walked to a bound), their
    # hydration and the state's count (available: the pair's size, then its count, from what
    # waits or down its ready rows), and the suggestions.
    with django_assert_num_queries(15):
        response = operator_client.get(url, {"state": "available", "kind": "tests.noop"})
    assert len(response.context["jobs"]) == 50


def test_detail_shows_attempts_errors_progress_and_checkpoint(operator_client):
    job_id = awa.enqueue("tests.always_fails", args={"message": "kaput"}, max_attempts=2)
    run_burst()
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.attempt_state (job_id, run_lease, progress, checkpoint) "
            'VALUES (%s, 1, \'{"percent": 40, "message": "halfway"}\', \'{"page": 7}\') '
            "ON CONFLICT (job_id) DO UPDATE SET progress = excluded.progress, "
            "checkpoint = excluded.checkpoint",
            [job_id],
        )

    response = operator_client.get(detail_url(job_id))

    assert response.status_code == 200
    body = response.content.decode()
    assert response.context["job"].state in {"retryable", "failed"}
    assert "kaput on attempt 1" in body and "Traceback" in body
    assert "halfway" in body and "&quot;page&quot;: 7" in body
    assert [a.attempt for a in response.context["attempts"]] == [1]
    assert response.context["attempts"][0].outcome in {"retryable", "failed"}


def test_a_job_no_worker_knows_is_marked_on_the_list_and_on_its_page(operator_client):
    waiting = job_no_worker_knows("nobody.knows")
    other = noop.enqueue()

    listed = operator_client.get(reverse(LIST))
    rows = listed.content.decode().split('id="job-results"')[1].split("<tr>")
    (marked,) = [row for row in rows if "no worker knows this kind" in row]
    assert f">{waiting}</a>" in marked and f">{other}</a>" not in marked

    page = operator_client.get(detail_url(waiting))
    body = page.content.decode()
    assert page.context["job"].state == "retryable"
    assert 'id="job-unknown-kind"' in body and "<code>nobody.knows</code>" in body
    assert "unknown job kind &#x27;nobody.knows&#x27;" in body  # the error says what to change
    assert 'id="run-now-job"' in body
    assert 'id="job-unknown-kind"' not in operator_client.get(detail_url(other)).content.decode()


def test_detail_of_unknown_job_redirects_with_a_message(operator_client):
    response = operator_client.get(detail_url(10**12), follow=True)
    assert "does not exist" in response.content.decode()


def test_cancel_from_the_detail_page(operator_client):
    job_id = awa.enqueue("tests.noop", args={}, run_at=timedelta(hours=1))
    page = operator_client.get(detail_url(job_id))
    assert cancel_url(job_id).encode() in page.content

    response = operator_client.post(cancel_url(job_id), follow=True)

    assert awa.get_job(job_id).state == "cancelled"
    assert f"Job {job_id} cancelled." in response.content.decode()
    again = operator_client.post(cancel_url(job_id), follow=True)
    assert "already ended" in again.content.decode()


def test_viewer_sees_no_cancel_and_gets_403_on_a_crafted_post(viewer_client):
    job_id = awa.enqueue("tests.noop", args={})
    page = viewer_client.get(detail_url(job_id))
    assert page.status_code == 200
    assert b"cancel-job" not in page.content

    assert viewer_client.post(cancel_url(job_id)).status_code == 403
    assert awa.get_job(job_id).state == "available"


def test_cancel_needs_post(operator_client):
    job_id = awa.enqueue("tests.noop", args={})
    assert operator_client.get(cancel_url(job_id)).status_code == 405


def test_user_without_permission_gets_403(outsider_client):
    assert outsider_client.get(reverse(LIST)).status_code == 403
    assert outsider_client.get(detail_url(1)).status_code == 403


@pytest.mark.usefixtures("awa_db")
def test_anonymous_user_is_sent_to_login(client):
    response = client.get(reverse(LIST))
    assert response.status_code == 302 and "/login/" in response["Location"]


def retry_url(job_id: int) -> str:
    return reverse("admin:awa_django_job_retry", args=[job_id])


def test_retry_a_failed_job_from_the_detail_page(operator_client):
    job_id = awa.enqueue("tests.always_fails", args={}, max_attempts=1)
    run_burst()
    failed = awa.get_job(job_id)
    assert failed.state == "failed"
    assert retry_url(job_id).encode() in operator_client.get(detail_url(job_id)).content

    response = operator_client.post(retry_url(job_id), follow=True)

    assert f"Job {job_id} retried." in response.content.decode()
    retried = awa.get_job(job_id)
    assert retried.state == "available" and retried.errors == failed.errors
    run_burst()
    assert awa.get_job(job_id).run_lease > failed.run_lease


def test_retry_a_dead_letter_job_from_the_job_page(operator_client):
    job_id = awa.enqueue("tests.always_fails", args={}, max_attempts=1)
    run_burst()
    awa.dlq.move_failed(job_ids=[job_id])
    page = operator_client.get(detail_url(job_id))
    assert page.context["job"].state == "dlq"
    assert reverse("admin:awa_django_deadletter_change", args=[job_id]).encode() in page.content

    operator_client.post(retry_url(job_id))

    assert awa.get_job(job_id).state == "available"


def test_a_completed_job_offers_no_retry_and_refuses_one(operator_client):
    job_id = awa.enqueue("tests.noop", args={})
    run_burst()
    page = operator_client.get(detail_url(job_id))
    assert b"retry-job" not in page.content and b"cancel-job" not in page.content

    response = operator_client.post(retry_url(job_id), follow=True)

    assert "is not failed, cancelled or dead" in response.content.decode()
    assert awa.get_job(job_id).state == "completed"


def test_viewer_gets_403_on_a_crafted_retry(viewer_client):
    job_id = awa.enqueue("tests.always_fails", args={}, max_attempts=1)
    run_burst()
    assert b"retry-job" not in viewer_client.get(detail_url(job_id)).content
    assert viewer_client.post(retry_url(job_id)).status_code == 403
    assert awa.get_job(job_id).state == "failed"


def test_a_running_job_is_found_and_cancelled(operator_client):
    job_id = awa.enqueue("tests.slow_first", args={"seconds": 30})
    worker = BackgroundWorker(maintenance=False).start()
    try:
        wait_until(lambda: awa.get_job(job_id).state == "running")
        assert listed_ids(operator_client.get(reverse(LIST), {"state": "running"})) == [job_id]
        page = operator_client.get(detail_url(job_id))
        assert [a.outcome for a in page.context["attempts"]] == [None]
        assert b"cancel-job" in page.content

        operator_client.post(cancel_url(job_id))

        assert awa.get_job(job_id).state == "cancelled"
    finally:
        worker.stop()


def test_failed_history_kept_past_its_ring_slot_is_listed(operator_client):
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.terminal_history (job_id, run_lease, state, kind, queue, priority, "
            "args, attempt, max_attempts, created_at, metadata, tags, errors, finalized_at) "
            "VALUES (nextval('awa.job_id_seq'), 3, 'failed', 'tests.old', 'email', 2, '{}', 3, "
            "3, now(), '{}', '{}', '[]', now()) RETURNING job_id"
        )
        (job_id,) = cursor.fetchone()
    awa.enqueue("tests.noop", args={})

    response = operator_client.get(reverse(LIST), {"state": "failed", "queue": "email"})

    assert listed_ids(response) == [job_id]
    assert operator_client.get(detail_url(job_id)).context["job"].kind == "tests.old"


def test_retry_a_cancelled_job(operator_client):
    job_id = awa.enqueue("tests.noop", args={}, run_at=timedelta(hours=1))
    awa.cancel(job_id)
    assert retry_url(job_id).encode() in operator_client.get(detail_url(job_id)).content

    operator_client.post(retry_url(job_id))

    assert awa.get_job(job_id).state == "available"


def completed_count() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.done_entries WHERE outcome = 'completed'")
        return cursor.fetchone()[0]


def test_every_state_is_found_on_page_one_under_2000_newer_completed_jobs(operator_client):
    # Rare states first (older ids), then 2,000 newer completed jobs: a list that filtered a
    # window of the newest ids by state would say "No jobs match" for every rare one.
    failed, dead = (awa.enqueue("tests.always_fails", args={}, max_attempts=1) for _ in range(2))
    run_burst(queues={"default": 2})
    assert awa.dlq.move_failed(job_ids=[dead]) == 1
    scheduled = awa.enqueue("tests.noop", args={}, run_at=timedelta(hours=1))
    cancelled = awa.enqueue("tests.noop", args={}, queue="email")
    awa.cancel(cancelled)
    available = awa.enqueue("tests.noop", args={}, queue="email")
    running = [awa.enqueue("tests.slow_first", args={"seconds": 60}) for _ in range(2)]
    waiting = awa.enqueue("tests.parks", args={})
    worker = BackgroundWorker(maintenance=False, queues={"default": 8}).start()
    try:
        wait_until(lambda: {awa.get_job(j).state for j in running} == {"running"})
        wait_until(lambda: awa.get_job(waiting).state == "waiting_external")
        noop.enqueue_many([{"n": n} for n in range(2000)])
        wait_until(lambda: completed_count() >= 2000, timeout=120)
        expected = {
            "failed": [failed],
            "dlq": [dead],
            "scheduled": [scheduled],
            "cancelled": [cancelled],
            "available": [available],
            "running": sorted(running, reverse=True),
            "waiting_external": [waiting],
        }
        for state, job_ids in expected.items():
            response = operator_client.get(reverse(LIST), {"state": state})
            assert listed_ids(response) == job_ids, state
            assert response.context["state_count"] == len(job_ids), state
            assert f"{len(job_ids)} {state} job".encode() in response.content
        # Kind and queue narrow a state as they narrow the list.
        narrowed = {"state": "running", "kind": "tests.slow_first", "queue": "default"}
        assert listed_ids(operator_client.get(reverse(LIST), narrowed)) == sorted(
            running, reverse=True
        )
        assert (
            listed_ids(operator_client.get(reverse(LIST), {"state": "running", "queue": "email"}))
            == []
        )
        completed = operator_client.get(reverse(LIST), {"state": "completed"})
        assert len(listed_ids(completed)) == 50
        assert completed.context["state_count"] == 2000
        assert completed.context["next_query"] is not None
    finally:
        worker.stop()


CANCEL_SELECTED = "admin:awa_django_job_cancel_selected"


def test_bulk_cancel_of_ticked_rows_with_a_message_per_job(operator_client):
    done = awa.enqueue("tests.noop", args={})
    run_burst(queues={"default": 1})
    waiting = [awa.enqueue("tests.noop", args={}, queue="email") for _ in range(3)]
    later = awa.enqueue("tests.noop", args={}, run_at=timedelta(hours=1))
    page = operator_client.get(reverse(LIST))
    # A checkbox on every row that can still be cancelled, none on the finished one.
    for job_id in [*waiting, later]:
        assert f'id="select-{job_id}"'.encode() in page.content
    assert f'id="select-{done}"'.encode() not in page.content

    response = operator_client.post(
        reverse(CANCEL_SELECTED),
        {"job_ids": [*waiting, later, done], "return_query": "queue=email"},
        follow=True,
    )

    assert response.redirect_chain[-1][0] == reverse(LIST) + "?queue=email"
    assert [str(m) for m in response.context["messages"]] == [
        *(f"Job {job_id} cancelled." for job_id in [*waiting, later]),
        f"Job {done} was not cancelled: it had already ended.",
    ]
    assert {job.state for job in awa.get_jobs([*waiting, later])} == {"cancelled"}
    assert sorted(int(e.object_id) for e in LogEntry.objects.all()) == sorted([*waiting, later])


def test_bulk_cancel_needs_change_permission_and_shows_no_checkboxes_without_it(viewer_client):
    job_id = awa.enqueue("tests.noop", args={}, queue="email")
    page = viewer_client.get(reverse(LIST))
    assert b"jobs-cancel" not in page.content and f"select-{job_id}".encode() not in page.content
    denied = viewer_client.post(reverse(CANCEL_SELECTED), {"job_ids": [job_id]})
    assert denied.status_code == 403
    assert awa.get_job(job_id).state == "available"


def test_bulk_cancel_refuses_more_than_a_page_and_bad_ids(operator_client):
    too_many = operator_client.post(
        reverse(CANCEL_SELECTED), {"job_ids": list(range(1, 52))}, follow=True
    )
    assert [str(m) for m in too_many.context["messages"]] == ["Select at most 50 jobs at a time."]
    bad = operator_client.post(reverse(CANCEL_SELECTED), {"job_ids": [str(2**63)]}, follow=True)
    assert any("from 1 to" in str(m) for m in bad.context["messages"])


def test_kind_and_queue_match_a_case_insensitive_prefix_with_wildcards_taken_literally(
    operator_client,
):
    noop_job = awa.enqueue("tests.noop", args={}, queue="email")
    record = awa.enqueue("tests.record", args={}, queue="email")
    fails = awa.enqueue("tests.always_fails", args={}, run_at=timedelta(hours=1))
    url = reverse(LIST)

    assert listed_ids(operator_client.get(url, {"kind": "TESTS.NO"})) == [noop_job]
    assert listed_ids(operator_client.get(url, {"kind": "tests."})) == [fails, record, noop_job]
    assert listed_ids(operator_client.get(url, {"queue": "EM"})) == [record, noop_job]
    # The same on a state page.
    assert listed_ids(operator_client.get(url, {"kind": "Tests.R", "state": "available"})) == [
        record
    ]
    assert listed_ids(operator_client.get(url, {"kind": "tests.ALWAYS", "state": "scheduled"})) == [
        fails
    ]
    # "_" and "%" are characters of the name, not LIKE wildcards.
    assert listed_ids(operator_client.get(url, {"kind": "tests_"})) == []
    assert listed_ids(operator_client.get(url, {"kind": "%noop"})) == []
    assert listed_ids(operator_client.get(url, {"kind": "tests.always_"})) == [fails]


def test_detail_shows_what_a_native_handler_returned(operator_client):
    job_id = returns_value.enqueue(value={"order": "ord-7731"})
    run_burst()
    page = operator_client.get(detail_url(job_id)).content.decode()
    assert "<h2>Result</h2>" in page and "ord-7731" in page


def test_the_job_page_shows_progress_once_as_a_bar_with_the_attempts_time(operator_client):
    job_id = awa.enqueue("tests.always_fails", args={"message": "kaput"}, max_attempts=1)
    run_burst()
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.attempt_state (job_id, run_lease, progress) "
            'VALUES (%s, 1, \'{"percent": 42.4, "message": "page 4 of 10"}\') '
            "ON CONFLICT (job_id) DO UPDATE SET progress = excluded.progress",
            [job_id],
        )
    body = operator_client.get(detail_url(job_id)).content.decode()
    section = body[body.index('id="job-progress"') :].split("</p>")[0]
    assert '<progress max="100" value="42">' in section and "42%" in section
    assert "page 4 of 10" in section
    assert re.search(r"attempt 1 ran for \d+ s", section), section
    # One label: the heading, not a second "Progress" field under it.
    assert body.count(">Progress<") == 1
    # The error's time as every other time on the page, not its raw ISO string.
    error_at = awa.get_job(job_id).errors[-1]["at"]
    assert error_at not in body
    assert re.search(r"attempt 1</strong> at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC:", body)


def test_a_message_without_a_percent_shows_no_empty_bar(operator_client):
    job_id = awa.enqueue("tests.always_fails", args={"message": "kaput"}, max_attempts=1)
    run_burst()
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.attempt_state (job_id, run_lease, progress) "
            "VALUES (%s, 1, %s::jsonb) "
            "ON CONFLICT (job_id) DO UPDATE SET progress = excluded.progress",
            [job_id, '{"message": "warming up"}'],
        )
    body = operator_client.get(detail_url(job_id)).content.decode()
    section = body[body.index('id="job-progress"') :].split("</p>")[0]
    assert "warming up" in section and "<progress" not in section
