"""The dead-letter queue page: filters, keyset pages, detail, retry, retry-to-queue, purge with
its confirmation page, per-row messages and permissions."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.urls import reverse

import awa_django as awa
from tests.admin.conftest import staff_user
from tests.conftest import run_burst

LIST = "admin:awa_django_deadletter_changelist"
ACT = "admin:awa_django_deadletter_act"


def detail_url(job_id: int) -> str:
    return reverse("admin:awa_django_deadletter_change", args=[job_id])


def dead_job(
    message: str = "boom", *, queue: str = "default", kind: str = "tests.always_fails"
) -> int:
    """A job that failed for good and was moved into the DLQ."""
    job_id = awa.enqueue(kind, args={"message": message}, queue=queue, max_attempts=1)
    run_burst()
    assert awa.dlq.move_failed(job_ids=[job_id]) == 1
    return job_id


def insert_entries(
    count: int, *, queue: str = "default", age: timedelta = timedelta(0)
) -> list[int]:
    """``count`` DLQ rows written directly, for page-size tests (no worker needed)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.dlq_entries (job_id, kind, queue, priority, args, attempt, "
            "original_run_lease, max_attempts, created_at, metadata, tags, errors, dlq_reason, "
            "dlq_at) SELECT nextval('awa.job_id_seq'), 'tests.bulk', %s, 2, "
            "jsonb_build_object('n', n), 3, 3, 3, now(), '{}', '{}', "
            "jsonb_build_array(jsonb_build_object('attempt', 3, 'at', now(), 'message', 'x')), "
            "'attempts_exhausted', now() - %s FROM generate_series(1, %s) n RETURNING job_id",
            [queue, age, count],
        )
        return sorted(row[0] for row in cursor.fetchall())


def listed_ids(response) -> list[int]:
    return [entry.job_id for entry in response.context["entries"]]


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_list_and_detail_show_the_failure(operator_client):
    job_id = dead_job("card declined")

    listing = operator_client.get(reverse(LIST))
    assert listing.status_code == 200
    assert listed_ids(listing) == [job_id]
    assert b"moved_from_failed" in listing.content

    detail = operator_client.get(detail_url(job_id))
    body = detail.content.decode()
    assert detail.status_code == 200
    assert "card declined on attempt 1" in body
    assert "Traceback (most recent call last)" in body
    assert "&quot;message&quot;: &quot;card declined&quot;" in body


def test_filters_by_queue_kind_reason_age_and_id(operator_client):
    old = insert_entries(2, queue="email", age=timedelta(days=2))
    recent = insert_entries(1)
    url = reverse(LIST)

    assert listed_ids(operator_client.get(url, {"queue": "email"})) == sorted(old, reverse=True)
    assert listed_ids(operator_client.get(url, {"age": "1d"})) == sorted(old, reverse=True)
    assert (
        listed_ids(operator_client.get(url, {"kind": "tests.bulk", "queue": "default"})) == recent
    )
    assert listed_ids(operator_client.get(url, {"reason": "terminal_error"})) == []
    assert listed_ids(operator_client.get(url, {"job_id": old[0]})) == [old[0]]
    invalid = operator_client.get(url, {"queue": "nope", "age": "forever"})
    assert set(invalid.context["form"].errors) == {"queue", "age"}


def test_pages_follow_the_cursor_without_overlap(operator_client):
    ids = insert_entries(120)
    seen: list[int] = []
    response = operator_client.get(reverse(LIST))
    while True:
        seen.extend(listed_ids(response))
        if response.context["next_query"] is None:
            break
        response = operator_client.get(reverse(LIST) + "?" + response.context["next_query"])
    assert sorted(seen) == ids and len(seen) == len(set(seen))


def test_list_query_count_at_1000_entries(operator_client, django_assert_num_queries):
    insert_entries(1000)
    # Session and user, the statement time limit (set, then put back), one page query, one
    # count of the whole match and the two of the form's suggestions (names, error types): no
    # query per row.
    with django_assert_num_queries(8):
        response = operator_client.get(reverse(LIST))
    assert len(response.context["entries"]) == 50


def test_retry_puts_jobs_back_with_a_message_per_row(operator_client):
    first, second = dead_job(), dead_job()
    gone = insert_entries(1)[0]
    awa.dlq.purge(gone)

    response = operator_client.post(
        reverse(ACT), {"action": "retry", "job_ids": [first, second, gone]}, follow=True
    )

    assert messages_of(response) == [
        f"Job {first} retried.",
        f"Job {second} retried.",
        f"Job {gone} is no longer in the dead-letter queue.",
    ]
    assert awa.get_job(first).state == "available" and awa.get_job(second).state == "available"
    assert awa.dlq.get(first) is None


def test_retry_to_another_queue(operator_client):
    job_id = dead_job()
    response = operator_client.post(
        reverse(ACT), {"action": "retry", "job_ids": [job_id], "to_queue": "email"}, follow=True
    )
    assert messages_of(response) == [f"Job {job_id} retried to queue email."]
    job = awa.get_job(job_id)
    assert (job.state, job.queue) == ("available", "email")


def test_purge_asks_for_confirmation_first(operator_client):
    job_id = dead_job()

    confirm = operator_client.post(reverse(ACT), {"action": "purge", "job_ids": [job_id]})

    assert confirm.status_code == 200
    assert "Yes, purge" in confirm.content.decode() and f"job {job_id}" in confirm.content.decode()
    assert awa.dlq.get(job_id) is not None

    done = operator_client.post(
        reverse(ACT), {"action": "purge", "job_ids": [job_id], "confirmed": "on"}, follow=True
    )
    assert messages_of(done) == [f"Job {job_id} purged."]
    assert awa.dlq.get(job_id) is None


def test_purge_confirmation_says_what_stays_on_disk_and_until_when(operator_client):
    # A job routed to the DLQ from the ring leaves rows there; an entry whose ring slot is long
    # gone (written directly here) leaves nothing.
    kept = dead_job("secret argument")
    gone = insert_entries(1)[0]

    confirm = operator_client.post(reverse(ACT), {"action": "purge", "job_ids": [kept, gone]})

    assert confirm.context["kept_ids"] == [kept]
    body = " ".join(confirm.content.decode().replace("\xa0", " ").split())
    assert "no admin page, <code>awa.get_job</code> or retry finds them again" in body
    assert f"the ready row and failed attempt of job {kept}." in body
    assert "no job that completed less than 1 day ago" in body


def test_a_purged_job_is_gone_from_every_page_and_cannot_be_retried(operator_client):
    kept = dead_job("secret argument")
    gone = insert_entries(1)[0]
    operator_client.post(
        reverse(ACT), {"action": "purge", "job_ids": [kept, gone], "confirmed": "on"}
    )

    for job_id in (kept, gone):
        assert awa.get_job(job_id) is None
        page = operator_client.get(reverse("admin:awa_django_job_change", args=[job_id]))
        assert page.status_code == 302
        assert awa.retry(job_id) is False
        assert awa.dlq.move_failed(job_ids=[job_id]) == 0
    followed = operator_client.get(reverse("admin:awa_django_job_change", args=[kept]), follow=True)
    assert any(
        f"Job {kept} was purged from the dead-letter queue at" in message
        for message in messages_of(followed)
    )
    for query in ({}, {"state": "failed"}, {"state": "dlq"}, {"kind": "tests"}):
        listing = operator_client.get(reverse("admin:awa_django_job_changelist"), query)
        assert b"secret argument" not in listing.content
        assert kept not in [job.job_id for job in listing.context["jobs"]]
    assert operator_client.get(reverse(LIST)).context["entries"] == []


def test_an_empty_or_malformed_selection_is_refused_with_a_message(operator_client):
    empty = operator_client.post(reverse(ACT), {"action": "retry"}, follow=True)
    assert any("select at least one job" in m for m in messages_of(empty))
    bad = operator_client.post(reverse(ACT), {"action": "retry", "job_ids": ["x"]}, follow=True)
    assert any("whole numbers" in m for m in messages_of(bad))
    for job_id in (2**63, 0):
        past = operator_client.post(
            reverse(ACT), {"action": "purge", "job_ids": [1, job_id]}, follow=True
        )
        assert any(f"from 1 to {2**63 - 1}" in m for m in messages_of(past))


def test_an_id_past_bigint_is_a_form_error_in_the_filters_and_a_404_as_a_url(operator_client):
    for query in ({"job_id": 2**63}, {"before_at": "2026-01-01T00:00:00Z", "before_id": 2**63}):
        response = operator_client.get(reverse(LIST), query)
        assert response.status_code == 200
        assert response.context["entries"] == []
        assert response.context["form"].errors
    assert operator_client.get(f"{reverse(LIST)}{2**63}/").status_code == 404


def test_viewer_sees_no_actions_and_gets_403_on_crafted_posts(viewer_client):
    job_id = dead_job()
    for url in (reverse(LIST), detail_url(job_id)):
        page = viewer_client.get(url)
        assert page.status_code == 200
        assert b"dlq-retry" not in page.content and b"dlq-purge" not in page.content
    for action in ("retry", "purge"):
        denied = viewer_client.post(
            reverse(ACT), {"action": action, "job_ids": [job_id], "confirmed": "on"}
        )
        assert denied.status_code == 403
    # Refused before the form is read: a POST without ids, or with no valid action, is a 403
    # too, not a redirect with a form error.
    for url in (reverse(ACT), reverse("admin:awa_django_deadletter_act_matching")):
        for data in ({"action": "retry"}, {"action": "purge"}, {"action": "x"}, {}):
            assert viewer_client.post(url, data).status_code == 403
    assert awa.dlq.get(job_id) is not None


@pytest.mark.usefixtures("awa_db")
def test_change_without_delete_may_retry_but_not_purge():
    client = Client()
    client.force_login(staff_user("retrier", ["view_deadletter", "change_deadletter"]))
    first, second = dead_job(), dead_job()
    page = client.get(reverse(LIST))
    assert b"dlq-retry" in page.content and b"dlq-purge" not in page.content

    assert client.post(reverse(ACT), {"action": "purge", "job_ids": [first]}).status_code == 403
    assert client.post(reverse(ACT), {"action": "retry", "job_ids": [second]}).status_code == 302
    assert awa.dlq.get(first) is not None and awa.dlq.get(second) is None


def test_user_without_permission_gets_403(outsider_client):
    assert outsider_client.get(reverse(LIST)).status_code == 403
    assert User.objects.filter(username="outsider").exists()


MATCHING = "admin:awa_django_deadletter_act_matching"


def dlq_ids(queue: str) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT job_id FROM awa.dlq_entries WHERE queue = %s ORDER BY 1", [queue])
        return [row[0] for row in cursor.fetchall()]


def test_retry_all_matching_confirms_the_count_then_retries_every_page_in_batches(
    operator_client, monkeypatch
):
    monkeypatch.setattr(awa.dlq, "BULK_BATCH_SIZE", 50)
    matching = insert_entries(120, queue="default")
    other = insert_entries(3, queue="email")
    page = operator_client.get(reverse(LIST), {"queue": "default"})
    assert b"dlq-retry-matching" in page.content and b"dlq-purge-matching" in page.content
    assert len(listed_ids(page)) == 50  # one page shown, 120 covered

    confirm = operator_client.post(reverse(MATCHING), {"action": "retry", "queue": "default"})
    assert confirm.context["count"] == 120
    assert "120 dead-letter jobs match queue=default." in confirm.content.decode()
    assert "Yes, retry 120 jobs" in confirm.content.decode()
    assert dlq_ids("default") == matching  # nothing done before the confirmation

    done = operator_client.post(
        reverse(MATCHING), {"action": "retry", "queue": "default", "confirmed": "on"}, follow=True
    )
    assert messages_of(done) == ["Retried 120 dead-letter jobs matching queue=default."]
    assert dlq_ids("default") == [] and dlq_ids("email") == other
    assert {job.state for job in awa.get_jobs(matching)} == {"available"}
    entry = LogEntry.objects.get()
    assert entry.object_repr == "dead-letter jobs matching queue=default"
    assert entry.action_flag == CHANGE and entry.object_id is None

    # Safe to re-run: nothing left to do, nothing done twice.
    again = operator_client.post(
        reverse(MATCHING), {"action": "retry", "queue": "default", "confirmed": "on"}, follow=True
    )
    assert messages_of(again) == ["Retried 0 dead-letter jobs matching queue=default."]


def test_purge_all_matching_an_age_filter(operator_client):
    old = insert_entries(4, age=timedelta(days=2))
    new = insert_entries(2)
    confirm = operator_client.post(reverse(MATCHING), {"action": "purge", "age": "1d"})
    assert confirm.context["count"] == 4
    done = operator_client.post(
        reverse(MATCHING), {"action": "purge", "age": "1d", "confirmed": "on"}, follow=True
    )
    assert messages_of(done) == ["Purged 4 dead-letter jobs matching in the DLQ for over 1d."]
    assert dlq_ids("default") == new and all(awa.dlq.get(j) is None for j in old)
    assert LogEntry.objects.get().action_flag == DELETION


def test_all_matching_needs_a_filter(operator_client):
    insert_entries(2)
    refused = operator_client.post(
        reverse(MATCHING), {"action": "purge", "confirmed": "on"}, follow=True
    )
    assert messages_of(refused) == ["Choose a queue, kind, reason or age first."]
    assert len(dlq_ids("default")) == 2
    page = operator_client.get(reverse(LIST))
    assert b"dlq-retry-matching" not in page.content


@pytest.mark.usefixtures("awa_db")
def test_all_matching_is_permission_checked_like_the_single_actions(viewer_client):
    ids = insert_entries(2)
    retrier = Client()
    retrier.force_login(staff_user("retrier", ["view_deadletter", "change_deadletter"]))
    page = retrier.get(reverse(LIST), {"queue": "default"})
    assert b"dlq-retry-matching" in page.content and b"dlq-purge-matching" not in page.content
    for client, action in ((viewer_client, "retry"), (viewer_client, "purge"), (retrier, "purge")):
        denied = client.post(
            reverse(MATCHING), {"action": action, "queue": "default", "confirmed": "on"}
        )
        assert denied.status_code == 403
    assert dlq_ids("default") == ids
    assert (
        b"dlq-retry-matching" not in viewer_client.get(reverse(LIST), {"queue": "default"}).content
    )
