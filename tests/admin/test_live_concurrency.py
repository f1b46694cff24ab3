"""Changing a queue's concurrency live from the queue health page (#36): set and reset, each in
the admin log; 403 without the change permission; bad values a 400 that changes nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.admin.models import LogEntry
from django.db import connection
from django.urls import reverse

import awa_django as awa
from awa_django.admin.health import served_concurrency
from awa_django.limits import MAX_LIVE_CONCURRENCY
from awa_django.ops.runtimes import RuntimeRecord

PAGE = "admin:awa_django_queue_changelist"
SET = "admin:awa_django_queue_concurrency"


def live_concurrency(queue: str) -> tuple[int | None, str | None]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT concurrency, concurrency_set_by FROM awa.queue_meta WHERE queue = %s", [queue]
        )
        row = cursor.fetchone()
    return (None, None) if row is None else (row[0], row[1])


def row_of(response, queue: str):
    return next(row for row, *_ in response.context["rows"] if row.queue == queue)


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_set_then_reset_shows_on_the_page_and_in_the_admin_log(operator_client):
    page = operator_client.get(reverse(PAGE))
    assert b'id="set-concurrency-default"' in page.content
    assert b'id="reset-concurrency-default"' not in page.content

    done = operator_client.post(
        reverse(SET), {"action": "set", "queue": "default", "concurrency": "4"}, follow=True
    )
    assert messages_of(done) == [
        "Queue default: at most 4 jobs at once in each worker process, from now on."
    ]
    assert live_concurrency("default") == (4, "operator")
    assert row_of(done, "default").concurrency == 4
    assert (
        b"4 set live" in done.content
        and b"no live worker" in done.content
        and b'id="reset-concurrency-default"' in done.content
    )
    # The other queues keep their configured value.
    assert row_of(done, "email").concurrency is None

    reset = operator_client.post(reverse(SET), {"action": "reset", "queue": "default"}, follow=True)
    assert messages_of(reset) == [
        "Queue default: concurrency back to each worker's configured value."
    ]
    assert live_concurrency("default")[0] is None
    assert row_of(reset, "default").concurrency is None

    logged = [
        entry.change_message
        for entry in LogEntry.objects.filter(object_id="default").order_by("action_time")
    ]
    assert logged == ["Concurrency set to 4.", "Concurrency reset to the configured value."]


@pytest.mark.parametrize(
    "value",
    ["0", "-3", str(MAX_LIVE_CONCURRENCY + 1), "99999999999999999999999", "2.5", "four", ""],
)
def test_a_bad_value_is_a_400_that_changes_nothing(operator_client, value):
    awa.queues.set_concurrency("default", 3)
    response = operator_client.post(
        reverse(SET), {"action": "set", "queue": "default", "concurrency": value}
    )
    assert response.status_code == 400
    [message] = messages_of(response)
    assert message.startswith("concurrency: Concurrency must be")
    assert live_concurrency("default")[0] == 3
    assert not LogEntry.objects.exists()


def test_an_unknown_queue_or_action_is_a_400(operator_client):
    unknown = operator_client.post(
        reverse(SET), {"action": "set", "queue": "nope", "concurrency": "2"}
    )
    assert unknown.status_code == 400
    assert any(m.startswith("queue:") for m in messages_of(unknown))
    odd = operator_client.post(
        reverse(SET), {"action": "explode", "queue": "default", "concurrency": "2"}
    )
    assert odd.status_code == 400
    assert live_concurrency("nope") == (None, None)
    assert live_concurrency("default")[0] is None


def test_without_the_change_permission_a_post_is_403_and_no_form_is_shown(viewer_client):
    page = viewer_client.get(reverse(PAGE))
    assert b"set-concurrency-default" not in page.content
    for data in (
        {"action": "set", "queue": "default", "concurrency": "5"},
        {"action": "reset", "queue": "default"},
        {"action": "set", "queue": "default", "concurrency": "0"},  # 403 before validation
        {},
    ):
        assert viewer_client.post(reverse(SET), data).status_code == 403
    assert live_concurrency("default") == (None, None)
    assert not LogEntry.objects.exists()


def test_the_ops_api_refuses_bad_values_naming_the_field(awa_db):
    for bad in (0, -1, MAX_LIVE_CONCURRENCY + 1, 2.0, True, "3"):
        with pytest.raises(awa.InvalidJob) as caught:
            awa.queues.set_concurrency("default", bad)  # type: ignore[arg-type]
        assert caught.value.field == "concurrency"
    with pytest.raises(awa.InvalidJob) as unknown:
        awa.queues.set_concurrency("nope", 2)
    assert unknown.value.field == "queue"
    assert live_concurrency("default") == (None, None)

    awa.queues.set_concurrency("default", MAX_LIVE_CONCURRENCY, by="script")
    [default] = [q for q in awa.queues.stats() if q.queue == "default"]
    assert (default.concurrency, default.concurrency_set_by) == (MAX_LIVE_CONCURRENCY, "script")
    awa.queues.reset_concurrency("default")
    assert live_concurrency("default")[0] is None


def test_the_column_says_what_the_live_workers_run_the_queue_at():
    def instance(queues: dict[str, int], *, live: bool = True, stopping: bool = False):
        now = datetime.now(UTC)
        return RuntimeRecord(
            instance_id="i",
            hostname="h",
            pid=1,
            version="v",
            started_at=now,
            last_seen_at=now,
            queues=queues,
            in_flight=0,
            is_leader=False,
            healthy=True,
            shutting_down=stopping,
            live=live,
        )

    served = served_concurrency(
        [
            instance({"default": 4, "email": 2}),
            instance({"default": 8}),
            instance({"default": 4}),
            instance({"email": 9}, live=False),  # stale: not counted
            instance({"email": 9}, stopping=True),  # leaving: not counted
        ]
    )
    assert served == {"default": "4, 8 in 3 workers", "email": "2 in 1 worker"}
