"""Dead letters grouped by error: the fingerprint, the groups page, and retry or purge of a
whole group with its count confirmed first, under the same permissions as the other actions."""

from __future__ import annotations

import json

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.urls import reverse

import awa_django as awa
from tests.admin.test_dlq import dead_job, messages_of

GROUPS = "admin:awa_django_deadletter_groups"
LIST = "admin:awa_django_deadletter_changelist"
MATCHING = "admin:awa_django_deadletter_act_matching"


def fingerprint(message: str | None) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT awa.error_fingerprint(%s)", [message])
        return str(cursor.fetchone()[0])


def failures(error_type: str | None, messages: list[str], *, queue: str = "default") -> list[int]:
    """DLQ rows written directly, each with one error of ``error_type`` (none when None)."""
    ids = []
    with connection.cursor() as cursor:
        for message in messages:
            error = {"attempt": 1, "message": message}
            if error_type is not None:
                error["type"] = error_type
            cursor.execute(
                "INSERT INTO awa.dlq_entries (job_id, kind, queue, priority, args, attempt,"
                " original_run_lease, max_attempts, created_at, metadata, tags, errors,"
                " dlq_reason) VALUES (nextval('awa.job_id_seq'), 'tests.bulk', %s, 2, '{}', 1,"
                " 1, 1, now(), '{}', '{}', jsonb_build_array(%s::jsonb), 'terminal_error')"
                " RETURNING job_id",
                [queue, json.dumps(error)],
            )
            ids.append(cursor.fetchone()[0])
    return ids


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("order 12 not found", "order <n> not found"),
        ("order 9481 not found", "order <n> not found"),
        ("user 550e8400-e29b-41d4-a716-446655440000 gone", "user <id> gone"),
        ("bad pointer 0xDEADBEEF", "bad pointer <hex>"),
        ("commit a3f9c2e1b7 rejected", "commit <hex> rejected"),
        ("deadline exceeded", "deadline exceeded"),
        (None, ""),
    ],
)
def test_the_fingerprint_replaces_what_varies(awa_db, message, expected):
    assert fingerprint(message) == expected


def test_the_fingerprint_reads_a_bounded_prefix_of_a_huge_message(awa_db):
    assert fingerprint("x" * 10_000) == "x" * 500


def test_groups_count_by_type_and_fingerprint_with_first_and_last_seen(operator_client):
    missing = failures("LookupError", [f"order {n} not found" for n in range(5)])
    failures("ValueError", ["order 1 not found"])  # same message, another type
    failures(None, ["lost contact with worker 7"])
    failures("LookupError", ["order 3 not found"], queue="email")

    page = operator_client.get(reverse(GROUPS))
    assert page.status_code == 200
    found = page.context["found"]
    assert found.scanned == 8
    top = found.groups[0]
    assert (top.error_type, top.fingerprint, top.count) == (
        "LookupError",
        "order <n> not found",
        6,
    )
    assert top.first_at <= top.last_at
    assert {(g.error_type, g.count) for g in found.groups[1:]} == {("ValueError", 1), ("(none)", 1)}

    only_default = operator_client.get(reverse(GROUPS), {"queue": "default"}).context["found"]
    assert only_default.groups[0].count == 5

    listing = operator_client.get(
        reverse(LIST), {"error_type": "LookupError", "fingerprint": "order <n> not found"}
    )
    assert len(listing.context["entries"]) == 6
    assert set(missing) <= {entry.job_id for entry in listing.context["entries"]}


def test_retry_group_confirms_its_count_then_retries_only_that_group(operator_client):
    group = failures("LookupError", [f"order {n} not found" for n in range(4)])
    other = failures("ValueError", ["order 1 not found"])
    data = {"action": "retry", "error_type": "LookupError", "fingerprint": "order <n> not found"}

    confirm = operator_client.post(reverse(MATCHING), data)
    assert confirm.context["count"] == 4
    body = confirm.content.decode()
    assert "error type=LookupError" in body and "Yes, retry 4 jobs" in body
    assert awa.dlq.depth() == 5  # nothing done before the confirmation

    done = operator_client.post(
        reverse(MATCHING), {**data, "counted": "4", "confirmed": "on"}, follow=True
    )
    assert messages_of(done) == [
        "Retried 4 dead-letter jobs matching error type=LookupError,"
        " message like=order <n> not found."
    ]
    assert {job.state for job in awa.get_jobs(group)} == {"available"}
    assert [entry.job_id for entry in awa.dlq.list()] == other
    assert LogEntry.objects.get().action_flag == CHANGE


def test_purge_group_says_how_many_of_the_counted_it_reached(operator_client):
    failures("LookupError", [f"order {n} not found" for n in range(3)])
    data = {"action": "purge", "error_type": "LookupError", "fingerprint": "order <n> not found"}
    confirm = operator_client.post(reverse(MATCHING), data)
    assert confirm.context["count"] == 3
    # Another operator purges one meanwhile: the result says so against the confirmed count.
    awa.dlq.purge(awa.dlq.list(limit=1)[0].job_id)
    done = operator_client.post(
        reverse(MATCHING), {**data, "counted": "3", "confirmed": "on"}, follow=True
    )
    assert messages_of(done) == [
        "Purged 2 of the 3 dead-letter jobs counted matching error type=LookupError,"
        " message like=order <n> not found."
    ]
    assert awa.dlq.depth() == 0
    assert LogEntry.objects.get().action_flag == DELETION


def test_a_purged_group_of_ring_jobs_is_gone_from_the_jobs_pages(operator_client):
    job_id = dead_job("secret 42")
    (group,) = operator_client.get(reverse(GROUPS)).context["found"].groups
    operator_client.post(
        reverse(MATCHING),
        {
            "action": "purge",
            "error_type": group.error_type,
            "fingerprint": group.fingerprint,
            "confirmed": "on",
        },
    )
    assert awa.get_job(job_id) is None


def test_view_only_staff_see_groups_but_may_not_act_on_them(viewer_client, outsider_client):
    failures("LookupError", ["order 1 not found"])
    page = viewer_client.get(reverse(GROUPS))
    assert page.status_code == 200
    assert b"group-retry" not in page.content and b"group-purge" not in page.content
    for action in ("retry", "purge"):
        refused = viewer_client.post(
            reverse(MATCHING),
            {"action": action, "error_type": "LookupError", "confirmed": "on"},
        )
        assert refused.status_code == 403
    assert outsider_client.get(reverse(GROUPS)).status_code == 403
    assert awa.dlq.depth() == 1 and not LogEntry.objects.exists()


def test_groups_page_with_an_empty_dlq_and_with_bad_filters(operator_client):
    empty = operator_client.get(reverse(GROUPS))
    assert empty.status_code == 200 and b"holds no matching jobs" in empty.content
    bad = operator_client.get(reverse(GROUPS), {"queue": "nope", "age": "forever"})
    assert bad.status_code == 200 and set(bad.context["form"].errors) == {"queue", "age"}


def test_groups_need_csrf(operator_client):
    client = Client(enforce_csrf_checks=True)
    client.force_login(User.objects.get(username="operator"))
    failures("LookupError", ["order 1 not found"])
    refused = client.post(
        reverse(MATCHING), {"action": "purge", "error_type": "LookupError", "confirmed": "on"}
    )
    assert refused.status_code == 403 and awa.dlq.depth() == 1


def test_python_api_groups_and_filters_by_group(awa_db):
    failures("LookupError", ["order 1 not found", "order 2 not found"])
    failures("ValueError", ["bad"])
    found = awa.dlq.groups()
    assert [(g.error_type, g.count) for g in found.groups] == [
        ("LookupError", 2),
        ("ValueError", 1),
    ]
    assert awa.dlq.groups(scan=1).scanned == 1
    assert awa.dlq.purge_bulk(error_type="ValueError") == 1
    assert awa.dlq.retry_bulk(fingerprint="order <n> not found") == 2
    assert awa.dlq.depth() == 0


def test_groups_take_every_filter_the_list_takes(awa_db):
    # One filter for every DLQ reading: a group's own type narrows the grouping as it does
    # the list.
    failures("LookupError", ["order 1 not found"])
    failures("builtins.ValueError", ["bad 3", "bad 7", "worse"])
    found = awa.dlq.groups(error_type_prefix="value")
    assert [(g.fingerprint, g.count) for g in found.groups] == [("bad <n>", 2), ("worse", 1)]
    assert found.scanned == 3
    assert awa.dlq.groups(fingerprint="bad <n>").scanned == 2
    assert len(awa.dlq.list(error_type_prefix="value")) == found.scanned
