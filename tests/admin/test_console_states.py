"""Every awa admin page keeps working in the states an operator meets at 3 a.m.: no jobs at all,
a paused queue, a queue only the database knows (its declaration gone from the settings), and a
user who may only look; plus the shard page's lane counts."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.test import override_settings
from django.urls import reverse

import awa_django as awa
from awa_django.ops import queues, shards

PAGES = [
    ("admin:awa_django_job_changelist", {}),
    ("admin:awa_django_job_changelist", {"state": "available"}),
    ("admin:awa_django_deadletter_changelist", {}),
    ("admin:awa_django_queue_changelist", {}),
    ("admin:awa_django_queue_changelist", {"live": "1"}),
    ("admin:awa_django_queue_cron", {}),
    ("admin:awa_django_queue_shards", {}),
    ("admin:awa_django_queue_shards", {"live": "1"}),
    ("admin:awa_django_queuedescriptor_changelist", {}),
    ("admin:awa_django_kinddescriptor_changelist", {}),
    ("admin:awa_django_runtimeinstance_changelist", {}),
]
SHARDS = "admin:awa_django_queue_shards"


def legacy_queue_with_jobs() -> list[int]:
    """Jobs on "legacy", a queue since removed from AWA["QUEUES"], split into 2 shards, of a
    kind whose handler is gone too (enqueued as another service's kind would be)."""
    with override_settings(
        AWA={
            **settings.AWA,
            "QUEUES": {**settings.AWA["QUEUES"], "legacy": {}},
            "EXTERNAL_KINDS": ["shop.retired_kind"],
        }
    ):
        shards.set_enqueue_shards("legacy", 2)
        return [
            awa.enqueue("shop.retired_kind", args={}, queue="legacy"),
            awa.enqueue("shop.retired_kind", args={}, queue="legacy", run_at=timedelta(hours=1)),
        ]


def test_every_page_renders_with_no_jobs(operator_client, viewer_client):
    for client in (operator_client, viewer_client):
        for name, query in PAGES:
            response = client.get(reverse(name), query)
            assert response.status_code == 200, (name, query)


def test_every_page_renders_with_a_paused_queue_and_an_undeclared_one(
    operator_client, viewer_client
):
    legacy_queue_with_jobs()
    queues.pause("email", by="test")
    for client in (operator_client, viewer_client):
        for name, query in PAGES:
            response = client.get(reverse(name), query)
            assert response.status_code == 200, (name, query)
        health = client.get(reverse("admin:awa_django_queue_changelist"), {"live": "1"})
        body = health.content.decode()
        assert "paused" in body.split('id="queue-email"')[1].split("</tr>")[0]
        assert "undeclared" in body.split('id="queue-legacy"')[1].split("</tr>")[0]


def test_shard_page_shows_each_queues_shard_count_and_waiting_per_lane(operator_client):
    legacy_queue_with_jobs()
    shards.set_enqueue_shards("default", 4)
    for key in ("a", "b", "c"):
        awa.enqueue("tests.noop", args={}, ordering_key=key, priority=1)
    awa.enqueue("tests.noop", args={}, queue="email", priority=3)

    page = operator_client.get(reverse(SHARDS), {"live": "1"})

    by_queue = {q.queue: q for q in page.context["queues"]}
    assert (by_queue["default"].enqueue_shards, by_queue["default"].waiting) == (4, 3)
    assert {lane.priority for lane in by_queue["default"].lanes} == {1}
    assert sum(lane.waiting for lane in by_queue["default"].lanes) == 3
    assert (by_queue["email"].enqueue_shards, by_queue["email"].waiting) == (1, 1)
    # Only the waiting job counts: the scheduled one is in the backlog, not a lane.
    legacy = by_queue["legacy"]
    assert (legacy.declared, legacy.enqueue_shards, legacy.waiting) == (False, 2, 1)
    body = page.content.decode()
    row = body.split('data-queue="legacy"')[1].split("</tr>")[0]
    assert "undeclared" in row and "p2 / s" in row and ": 1</span>" in row
    email_row = body.split('data-queue="email"')[1].split("</tr>")[0]
    assert "p3 / s0: 1" in email_row
    health = operator_client.get(reverse("admin:awa_django_queue_changelist"))
    assert f'href="{reverse(SHARDS)}"'.encode() in health.content


def test_shard_page_counts_nothing_unless_asked(operator_client, django_assert_num_queries):
    legacy_queue_with_jobs()
    # Session and user, the statement time limit (set, then put back), then the shard counts:
    # no read of the waiting jobs.
    with django_assert_num_queries(5):
        page = operator_client.get(reverse(SHARDS))
    by_queue = {q.queue: q for q in page.context["queues"]}
    assert (by_queue["legacy"].enqueue_shards, by_queue["legacy"].lanes) == (2, [])
    assert b'id="count-lanes"' in page.content and b"Waiting per lane" not in page.content


def test_shard_page_needs_the_view_permission(outsider_client):
    assert outsider_client.get(reverse(SHARDS)).status_code == 403
