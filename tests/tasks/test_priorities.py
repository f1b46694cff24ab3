"""Django's priorities -100..100 on awa: each value is a lane priority of its own, claimed in
order (higher first, equal ones in enqueue order) and ranked among native ``@awa.job``
priorities; priority aging never inverts them."""

from __future__ import annotations

import json
import random
import time
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection, transaction
from django.test import override_settings
from django.urls import reverse

import awa_django as awa
import awa_django.tasks as tasks_package
from awa_django.declarations.priorities import (
    STORED_PRIORITY_MAX,
    STORED_PRIORITY_MIN,
    awa_priority,
    django_priority,
    shown_priority,
)
from awa_django.tasks.compat import InvalidTask
from tests.conftest import run_burst
from tests.scheduling.test_aging import claim
from tests.tasks import tasks

pytestmark = pytest.mark.usefixtures("awa_db", "close_orm_thread_connection")


def ran() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT note FROM tests_job_runs ORDER BY id")
        return [row[0] for row in cursor.fetchall()]


def enqueue_ranked(priority: int, label: str) -> str:
    return tasks.ranked.using(priority=priority).enqueue(label).id


def one_at_a_time(aging_interval_s: float = 60.0) -> None:
    """A worker with one permit, so jobs run (and are logged) in the order they are claimed."""
    queues = {"default": {"concurrency": 1, "aging_interval_s": aging_interval_s}, "email": {}}
    with override_settings(AWA={"QUEUES": queues}):
        run_burst(queues={"default": 1})


def test_every_django_priority_has_a_lane_priority_of_its_own_in_order():
    stored = [awa_priority(p) for p in range(-100, 101)]
    assert stored == sorted(stored, reverse=True) and len(set(stored)) == 201
    assert (awa_priority(100), awa_priority(-100)) == (STORED_PRIORITY_MIN, STORED_PRIORITY_MAX)
    # Django's default shares awa's default lane; native 1, 3, 4 rank with Django 1, -1, -2.
    assert [awa_priority(p) for p in (1, 0, -1, -2)] == [1, 2, 3, 4]
    assert tasks_package.awa_priority is awa_priority  # the documented public name


def test_a_later_higher_priority_runs_first():
    enqueue_ranked(50, "fifty")
    enqueue_ranked(90, "ninety")
    one_at_a_time()
    assert ran() == ["ninety", "fifty"]


def test_a_worker_process_runs_them_in_priority_order(worker_process):
    for priority, label in ((50, "fifty"), (-100, "lowest"), (90, "ninety"), (100, "highest")):
        enqueue_ranked(priority, label)
    worker = worker_process("--burst", "--queue", "default=1")
    assert worker.wait() == 0, worker.output
    assert ran() == ["highest", "ninety", "fifty", "lowest"]


def test_the_whole_range_runs_in_priority_order_and_ties_in_enqueue_order():
    priorities = [*range(-100, 101), 100, 100, 0, 0, -100, -100, 37]
    random.Random(21).shuffle(priorities)
    labels = [f"{p}/{n}" for n, p in enumerate(priorities)]
    for priority, label in zip(priorities, labels, strict=True):
        enqueue_ranked(priority, label)
    one_at_a_time()
    # sorted() is stable: equal priorities keep their enqueue order.
    expected = sorted(labels, key=lambda label: -int(label.split("/")[0]))
    assert ran() == expected
    assert expected[0].startswith("100/") and expected[-1].startswith("-100/")


def test_results_read_back_the_django_priority_enqueued():
    for priority in (100, 50, 0, -1, -100):
        result = tasks.ranked.using(priority=priority).enqueue(str(priority))
        assert tasks.ranked.get_result(result.id).task.priority == priority
        assert awa.get_job(int(result.id)).priority == 2 - priority


@pytest.mark.parametrize("priority", [101, -101, 1000])
def test_out_of_range_priorities_are_refused_as_django_refuses_them(priority):
    with pytest.raises(InvalidTask):
        tasks.ranked.using(priority=priority)
    with pytest.raises(InvalidTask):
        tasks.ranked.using(priority=priority).enqueue("refused")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.ready_entries")
        assert cursor.fetchone() == (0,)


def test_native_and_django_priorities_share_one_order_in_a_queue():
    awa.enqueue("tests.record", args={"n": 4}, priority=4)
    enqueue_ranked(-50, "django -50")
    awa.enqueue("tests.record", args={"n": 2})  # the default, 2
    enqueue_ranked(0, "django 0")
    enqueue_ranked(1, "django 1")
    awa.enqueue("tests.record", args={"n": 1}, priority=1)
    enqueue_ranked(-2, "django -2")
    enqueue_ranked(5, "django 5")
    awa.enqueue("tests.record", args={"n": 3}, priority=3)
    one_at_a_time()
    assert ran() == [
        "django 5",
        "django 1",  # Django 1 ranks with native 1: enqueue order between them
        "1",
        "2",  # Django's default 0 ranks with awa's default 2
        "django 0",
        "3",
        "4",  # Django -2 ranks with native 4
        "django -2",
        "django -50",
    ]


def claimed_in_order(aging_s: float, count: int) -> list[int]:
    """Job ids as claims that each compare lanes by aged priority take them, one per claim."""
    return [job.job_id for _ in range(count) for job in claim(limit=1, aging_s=aging_s)]


def test_aging_lifts_native_priorities_but_never_past_priority_1():
    old_low = awa.enqueue("tests.record", args={"n": 4}, priority=4)
    old_lazy = int(enqueue_ranked(-100, "lazy"))
    time.sleep(1.6)  # 3 steps of 0.5 s: native 4 -> 1, Django -100 (lane 102) -> 99
    above_1 = int(enqueue_ranked(2, "above 1"))  # lane 0: more urgent than aging ever gets
    urgent = awa.enqueue("tests.record", args={"n": 1}, priority=1)
    fresh_lazy = int(enqueue_ranked(-99, "fresh lazy"))  # lane 101: behind the aged 99
    order = claimed_in_order(aging_s=0.5, count=5)
    assert order == [above_1, old_low, urgent, old_lazy, fresh_lazy]


def test_aging_never_reorders_priorities_above_1():
    ninety = int(enqueue_ranked(90, "ninety"))
    hundred = int(enqueue_ranked(100, "hundred"))
    time.sleep(1.1)  # two steps of 0.5 s
    ninety_five = int(enqueue_ranked(95, "ninety-five"))
    assert claimed_in_order(aging_s=0.5, count=3) == [hundred, ninety_five, ninety]


def test_effective_priority_keeps_rows_more_urgent_than_1():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT awa.effective_priority(p::smallint, now() - interval '1 hour', 60)"
            " FROM unnest(ARRAY[-98, 0, 1, 4, 102]) p"
        )
        assert [row[0] for row in cursor.fetchall()] == [-98, 0, 1, 1, 42]


def test_django_priority_is_the_inverse_of_the_stored_lane():
    for priority in range(-100, 101):
        assert django_priority(awa_priority(priority)) == priority

    task = "django.tasks:tests.tasks.tasks.ranked"
    enqueued_at_50 = {"django_tasks": {"priority": 50}}
    assert shown_priority(task, -48, enqueued_at_50) == "50 (django.tasks; lane -48)"
    # Enqueued by 0.1.0, which put Django priorities in the lanes 1..4; or retried at another
    # priority: the priority it was enqueued with, and the lane it is in.
    assert shown_priority(task, 1, enqueued_at_50) == "50 (django.tasks; lane 1)"
    # Without the backend's record of it, the lane says it.
    assert shown_priority(task, -48, {}) == "50 (django.tasks; lane -48)"
    assert shown_priority(task, -48, {"django_tasks": {"priority": "high"}}) == (
        "50 (django.tasks; lane -48)"
    )
    assert shown_priority("tests.record", 3, enqueued_at_50) == "3"


def test_operators_see_a_tasks_django_priority_with_its_lane(client):
    task_id = int(enqueue_ranked(50, "urgent"))
    job_id = awa.enqueue("tests.record", args={"n": 1}, priority=3)
    client.force_login(User.objects.create_superuser("operator", password="pw"))

    listing = client.get(reverse("admin:awa_django_job_changelist")).content.decode()
    task_row = listing.split(f">{task_id}</a>")[1].split("</tr>")[0]
    assert "<td>50 (django.tasks; lane -48)</td>" in task_row
    job_row = listing.split(f">{job_id}</a>")[1].split("</tr>")[0]
    assert "<td>3</td>" in job_row
    detail = client.get(reverse("admin:awa_django_job_change", args=[task_id])).content.decode()
    assert "<dt>Priority</dt><dd>50 (django.tasks; lane -48)</dd>" in detail

    out = StringIO()
    call_command("awa_jobs", "list", stdout=out)
    lines = {line.split()[0]: line for line in out.getvalue().splitlines()[1:] if line.strip()}
    assert "50 (django.tasks; lane -48)" in lines[str(task_id)]
    # --json keeps the stored value, as awa.get_job does.
    out = StringIO()
    call_command("awa_jobs", "list", "--json", stdout=out)
    by_id = {record["job_id"]: record for record in json.loads(out.getvalue())}
    assert by_id[task_id]["priority"] == -48 and by_id[job_id]["priority"] == 3


def test_an_aged_claim_over_many_lanes_keeps_the_aged_order():
    # More than 4 lanes: the queue's claims go by lane marks, and an aged claim walks the lanes
    # below priority 1 before it compares the heads of the rest.
    old_low = awa.enqueue("tests.record", args={"n": 4}, priority=4)
    time.sleep(1.6)  # 3 steps of 0.5 s: native 4 -> 1
    by_priority = {p: int(enqueue_ranked(p, f"django {p}")) for p in (100, 50, 2, 1, 0, -1, -2)}
    by_priority[-100] = int(enqueue_ranked(-100, "django -100"))
    order = claimed_in_order(aging_s=0.5, count=9)
    assert order == [
        by_priority[100],  # lanes below 1 first, in priority order
        by_priority[50],
        by_priority[2],  # lane 0
        old_low,  # aged to 1, and waiting longer than Django 1's (lane 1) head
        by_priority[1],
        by_priority[0],  # lane 2
        by_priority[-1],
        by_priority[-2],  # lane 4, behind the aged job
        by_priority[-100],
    ]


def ready_rows_probed(claim_sql: str) -> int:
    """Index scans of the ready ring's partitions made by one statement (in its own transaction:
    pg_stat_xact_user_tables counts the current one's)."""
    probed = (
        "SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_xact_user_tables"
        " WHERE schemaname = 'awa' AND relname LIKE 'ready\\_entries\\_%'"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(probed)
        before = cursor.fetchone()[0]
        cursor.execute(claim_sql)
        assert len(cursor.fetchall()) == 1
        cursor.execute(probed)
        return int(cursor.fetchone()[0] - before)


def test_an_aged_claim_reads_no_head_of_lanes_it_does_not_reach():
    for priority in range(-100, 101):
        for _ in range(2):
            enqueue_ranked(priority, f"django {priority}")
    # A first claim marks the queue's lanes (all 201 may hold work).
    assert len(claim(limit=1, aging_s=0)) == 1
    aged = "SELECT * FROM awa.claim_ready('default', 1, 'test', 0, 60, false)"
    static = "SELECT * FROM awa.claim_ready('default', 1, 'test', 0, 0, false)"
    # The aged claim is served by the most urgent lane, as a static one: it read the head of
    # every lane (over 201 index scans of the ring), now only what the static claim reads.
    assert ready_rows_probed(aged) <= ready_rows_probed(static) + 2
    assert ready_rows_probed(aged) < 20
