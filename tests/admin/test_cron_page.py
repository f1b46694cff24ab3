"""The cron page under queue health: every stored schedule with its last and next fire, pause,
resume and trigger now, with queue health's permissions, CSRF and an admin log entry per
action."""

from __future__ import annotations

from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

import awa_django as awa
from tests.admin.test_audit import entries
from tests.maintenance.test_cron import store

PAGE = "admin:awa_django_queue_cron"
ACT = "admin:awa_django_queue_cron_act"
NAME = "tests.every_five"


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def row_of(response, name: str):
    return next(row for row in response.context["rows"] if row.schedule.name == name)


def test_no_schedule_says_so_and_queue_health_links_the_page(operator_client):
    page = operator_client.get(reverse(PAGE))
    assert page.status_code == 200 and b'id="cron-none"' in page.content
    health = operator_client.get(reverse("admin:awa_django_queue_changelist"))
    assert f'href="{reverse(PAGE)}"'.encode() in health.content


def test_schedules_show_their_timetable_last_and_next_fire(operator_client):
    store(name=NAME)
    before = timezone.now()

    page = operator_client.get(reverse(PAGE))

    row = row_of(page, NAME)
    assert row.problem is None and row.schedule.last_fire_at is None
    # */5: the next multiple of five minutes, at most five minutes away.
    assert before < row.next_fire_at <= before + timezone.timedelta(minutes=5)
    assert row.next_fire_at.minute % 5 == 0 and row.next_fire_at.second == 0
    body = page.content.decode()
    assert "<code>*/5 * * * *</code> (UTC)" in body and "tests.record on default" in body
    assert 'id="cron-pause-1"' in body and 'id="cron-trigger-1"' in body


def test_pause_resume_and_trigger_act_and_are_logged(operator_client):
    store(name=NAME)

    paused = operator_client.post(reverse(ACT), {"action": "pause", "name": NAME}, follow=True)
    assert messages_of(paused) == [f"Cron schedule {NAME} paused: it fires nothing."]
    row = row_of(paused, NAME)
    assert row.schedule.paused_by == "operator" and row.next_fire_at is None
    assert b'id="cron-resume-1"' in paused.content and b"(paused)" in paused.content

    again = operator_client.post(reverse(ACT), {"action": "pause", "name": NAME}, follow=True)
    assert messages_of(again) == [f"Cron schedule {NAME} is already paused."]

    resumed = operator_client.post(reverse(ACT), {"action": "resume", "name": NAME}, follow=True)
    assert row_of(resumed, NAME).schedule.paused_at is None

    triggered = operator_client.post(reverse(ACT), {"action": "trigger", "name": NAME}, follow=True)
    [message] = messages_of(triggered)
    job_id = int(message.split("job ")[1].split(" ")[0])
    job = awa.get_job(job_id)
    assert job.kind == "tests.record" and job.state == "available"
    # A trigger is outside the timetable: the last fire stays unset.
    assert row_of(triggered, NAME).schedule.last_fire_at is None

    repr_ = f"cron schedule {NAME}"
    assert entries() == [
        ("operator", "queue", None, CHANGE, repr_, "Paused."),
        ("operator", "queue", None, CHANGE, repr_, "Resumed."),
        ("operator", "queue", None, CHANGE, repr_, f"Triggered: job {job_id} enqueued."),
    ]


def test_unknown_schedule_or_action_is_refused_with_a_message_and_no_log(operator_client):
    store(name=NAME)
    for data, expected in [
        ({"action": "pause", "name": "nope"}, "name: no cron schedule named 'nope'."),
        ({"action": "remove", "name": NAME}, "action: Select a valid choice."),
        ({"action": "trigger", "name": "x" * 201}, "name: Ensure this value has at most 200"),
    ]:
        response = operator_client.post(reverse(ACT), data, follow=True)
        assert response.status_code == 200
        [message] = messages_of(response)
        assert message.startswith(expected), message
    assert not LogEntry.objects.exists()
    assert row_of(operator_client.get(reverse(PAGE)), NAME).schedule.paused_at is None


def test_viewer_sees_no_buttons_and_gets_403_on_crafted_posts(viewer_client, outsider_client):
    store(name=NAME)
    page = viewer_client.get(reverse(PAGE))
    assert page.status_code == 200 and NAME.encode() in page.content
    assert b"cron-pause-1" not in page.content and b'value="trigger"' not in page.content
    for action in ("pause", "trigger"):
        assert viewer_client.post(reverse(ACT), {"action": action, "name": NAME}).status_code == 403
    assert outsider_client.get(reverse(PAGE)).status_code == 403
    assert not LogEntry.objects.exists()
    assert row_of(viewer_client.get(reverse(PAGE)), NAME).schedule.paused_at is None


def test_actions_need_the_csrf_token(awa_db):
    store(name=NAME)
    client = Client(enforce_csrf_checks=True)
    client.force_login(User.objects.create_superuser("csrf", password="pw"))
    assert client.post(reverse(ACT), {"action": "pause", "name": NAME}).status_code == 403
    assert not LogEntry.objects.exists()


def test_a_schedule_this_deployment_cannot_parse_still_lists(operator_client):
    store(name=NAME)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE awa.cron_jobs SET timezone = 'Mars/Olympus_Mons' WHERE name = %s", [NAME]
        )
    page = operator_client.get(reverse(PAGE))
    assert page.status_code == 200
    row = row_of(page, NAME)
    assert row.next_fire_at is None and "Mars/Olympus_Mons" in row.problem
    assert b"unknown" in page.content


def test_recent_fires_show_each_jobs_outcome_and_link_to_it(operator_client):
    from awa_django.testing import run_jobs
    from tests.maintenance.test_cron import age_schedule, run_once

    store(name=NAME, schedule="* * * * *")
    page = operator_client.get(reverse(PAGE))
    assert row_of(page, NAME).fires == []
    assert '<td class="recent-fires">—</td>' in page.content.decode()

    age_schedule(NAME, 2)
    run_once()
    run_jobs()
    triggered = awa.cron.trigger(NAME)

    page = operator_client.get(reverse(PAGE))
    fires = row_of(page, NAME).fires
    assert [(f.job_id == triggered, f.state) for f in fires] == [
        (True, "available"),
        (False, "completed"),
    ]
    body = page.content.decode()
    for fire in fires:
        link = reverse("admin:awa_django_job_change", args=[fire.job_id])
        assert f'href="{link}" class="awa-badge {fire.state}"' in body
