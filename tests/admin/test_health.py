"""The queue health page: the per-queue table, last-hour charts, pause/resume, drain with its
confirmation page, and permissions."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.urls import reverse

import awa_django as awa
from tests.admin.test_console_states import legacy_queue_with_jobs
from tests.conftest import job_no_worker_knows, run_burst
from tests.jobs import noop

PAGE = "admin:awa_django_queue_changelist"
ACT = "admin:awa_django_queue_act"


def row_of(response, queue: str):
    return next(row for row, *_ in response.context["rows"] if row.queue == queue)


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def insert_samples(queue: str, count: int) -> None:
    """The leader's samples of the last ``count`` minutes (one a minute, 6 completions each)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.queue_stat_samples (queue, sampled_at, available, scheduled, "
            "retryable, running, waiting_external, dlq, lag_s, completed, failed) "
            "SELECT %s, now() - make_interval(mins => m), 10 + m, 1, 0, 2, 0, 0, 0.5, 6, 1 "
            "FROM generate_series(0, %s - 1) m",
            [queue, count],
        )


def test_table_shows_the_leaders_latest_sample_by_default(operator_client):
    insert_samples("default", 30)
    noop.enqueue_many([{"n": n} for n in range(3)])  # not counted: the snapshot is older

    response = operator_client.get(reverse(PAGE))

    assert response.status_code == 200
    default = row_of(response, "default")
    # The newest sample (m = 0) has available 10, and every sample counts 6 completions.
    assert (default.available, default.scheduled, default.running) == (10, 1, 2)
    assert (default.completed_last_hour, default.failed_last_hour) == (180, 30)
    assert default.throughput_per_min == pytest.approx(6 * 5 / 5)
    sampled = {row.queue: sampled_at for row, sampled_at, _ in response.context["rows"]}
    assert sampled["default"] is not None and sampled["email"] is None
    assert b"no sample" in response.content and b'id="count-now"' in response.content
    assert b'id="pause-default"' in response.content and b'id="drain-email"' in response.content


def test_the_default_table_counts_completions_from_the_first_job_without_a_sample(
    operator_client,
):
    noop.enqueue_many([{"n": n} for n in range(3)])
    awa.enqueue("tests.always_fails", args={}, queue="email", max_attempts=1)
    run_burst()
    response = operator_client.get(reverse(PAGE))
    default, email = row_of(response, "default"), row_of(response, "email")
    assert (default.completed_last_hour, email.failed_last_hour) == (3, 1)
    assert default.throughput_per_min == pytest.approx(3 / 5)


def test_count_now_reads_live_depths(operator_client):
    noop.enqueue_many([{"n": n} for n in range(3)])
    awa.enqueue("tests.noop", args={}, queue="email", run_at=timedelta(hours=1))

    response = operator_client.get(reverse(PAGE), {"live": "1"})

    default, email = row_of(response, "default"), row_of(response, "email")
    assert (default.available, default.scheduled, default.paused) == (3, 0, False)
    assert (email.available, email.scheduled) == (0, 1)
    assert b"Live counts" in response.content


def test_charts_plot_the_last_hour_of_samples(operator_client):
    insert_samples("default", 30)
    response = operator_client.get(reverse(PAGE))
    charts = {row.queue: charts for row, _, charts in response.context["rows"]}
    throughput, depth = charts["default"]
    assert "<svg" in throughput and "jobs/min" in throughput and "<polyline" in throughput
    assert "available" in depth and "<polyline" in depth
    # No CDN, no script: the chart is inline SVG.
    assert b"<script src=" not in response.content.split(b'id="content-main"')[1]
    assert b"No samples in the last hour" in response.content  # email has none


def test_page_queries_stay_constant_with_1000_jobs(operator_client, django_assert_num_queries):
    insert_samples("default", 60)
    noop.enqueue_many([{"n": n} for n in range(1000)])
    # Session and user, the statement time limit (set, then put back), then the hour's samples,
    # the queue control rows, the closures since the newest sample (a BRIN range read), the
    # jobs no worker knows (a partial index that holds only them) and the runtime rows (each
    # worker's concurrency): no count of waiting jobs, nothing per queue or row.
    with django_assert_num_queries(9):
        response = operator_client.get(reverse(PAGE))
    assert row_of(response, "default").available == 10


@pytest.mark.parametrize("live", [False, True], ids=["snapshot", "live"])
def test_jobs_no_worker_knows_are_counted_by_kind_with_a_link_to_them(operator_client, live):
    job_no_worker_knows("nobody.knows")
    job_no_worker_knows("nobody.knows")
    response = operator_client.get(reverse(PAGE), {"live": "1"} if live else {})
    assert row_of(response, "default").unknown_kinds == {"nobody.knows": 2}
    assert row_of(response, "email").unknown_kinds == {}
    body = response.content.decode()
    assert "2 nobody.knows: no worker knows this kind</a>" in body
    assert "?state=retryable&amp;queue=default&amp;kind=nobody.knows" in body


def test_pause_and_resume(operator_client):
    paused = operator_client.post(reverse(ACT), {"action": "pause", "queue": "email"}, follow=True)
    assert messages_of(paused) == ["Queue email paused: workers claim nothing from it."]
    assert row_of(paused, "email").paused and row_of(paused, "email").paused_by == "operator"
    assert b'id="resume-email"' in paused.content

    resumed = operator_client.post(
        reverse(ACT), {"action": "resume", "queue": "email"}, follow=True
    )
    assert messages_of(resumed) == ["Queue email resumed."]
    assert not row_of(resumed, "email").paused


def test_drain_asks_for_confirmation_then_cancels_pending_jobs(operator_client):
    ids = noop.enqueue_many([{"n": n} for n in range(4)])

    confirm = operator_client.post(reverse(ACT), {"action": "drain", "queue": "default"})
    assert confirm.status_code == 200
    assert b"Yes, drain default" in confirm.content
    assert {job.state for job in awa.get_jobs(ids)} == {"available"}

    done = operator_client.post(
        reverse(ACT), {"action": "drain", "queue": "default", "confirmed": "on"}, follow=True
    )
    assert messages_of(done) == ["Queue default drained: 4 pending jobs cancelled."]
    assert {job.state for job in awa.get_jobs(ids)} == {"cancelled"}


def test_each_rows_first_cell_holds_the_queue_its_status_and_its_actions(operator_client):
    """The cell that stays in view while a narrow screen scrolls the row sideways (the browser
    test measures it at 1,024 pixels)."""
    awa.queues.pause("email")
    body = operator_client.get(reverse(PAGE)).content.decode()
    header = body.split('id="queue-health"')[1].split("</tr>")[0]
    assert re.findall(r"<th[^>]*>([^<]*)</th>", header)[:2] == ["Queue", "Concurrency"]
    assert '<th class="awa-sticky">Queue</th>' in header
    for queue, status, action in (("default", "active", "pause"), ("email", "paused", "resume")):
        row = body.split(f'id="queue-{queue}"')[1].split("</tr>")[0]
        first = row.split('<td class="awa-sticky">')[1].split("</td>")[0]
        assert f'href="#chart-{queue}">{queue}</a>' in first and f">{status}</span>" in first
        assert f'id="{action}-{queue}"' in first and f'id="drain-{queue}"' in first


def test_unknown_queue_or_action_is_refused_with_a_message(operator_client):
    response = operator_client.post(
        reverse(ACT), {"action": "explode", "queue": "nope"}, follow=True
    )
    found = messages_of(response)
    assert any(m.startswith("action:") for m in found) and any(
        m.startswith("queue:") for m in found
    )


def test_viewer_sees_no_buttons_and_gets_403_on_crafted_posts(viewer_client):
    ids = noop.enqueue_many([{"n": 1}])
    page = viewer_client.get(reverse(PAGE))
    assert page.status_code == 200
    assert b"pause-default" not in page.content and b"drain-default" not in page.content
    for action in ("pause", "resume", "drain"):
        denied = viewer_client.post(
            reverse(ACT), {"action": action, "queue": "default", "confirmed": "on"}
        )
        assert denied.status_code == 403
    assert awa.get_jobs(ids)[0].state == "available"


def test_user_without_permission_gets_403(outsider_client):
    assert outsider_client.get(reverse(PAGE)).status_code == 403


def test_an_undeclared_queue_in_the_database_can_be_paused_and_drained(operator_client):
    ids = legacy_queue_with_jobs()
    page = operator_client.get(reverse(PAGE))
    assert not row_of(page, "legacy").declared
    assert b'id="pause-legacy"' in page.content and b'id="drain-legacy"' in page.content

    paused = operator_client.post(reverse(ACT), {"action": "pause", "queue": "legacy"}, follow=True)
    assert messages_of(paused) == ["Queue legacy paused: workers claim nothing from it."]
    assert row_of(paused, "legacy").paused
    confirm = operator_client.post(reverse(ACT), {"action": "drain", "queue": "legacy"})
    assert b"Yes, drain legacy" in confirm.content
    done = operator_client.post(
        reverse(ACT), {"action": "drain", "queue": "legacy", "confirmed": "on"}, follow=True
    )
    assert messages_of(done) == ["Queue legacy drained: 2 pending jobs cancelled."]
    assert {job.state for job in awa.get_jobs(ids)} == {"cancelled"}


def test_a_sample_the_leader_no_longer_takes_is_shown_as_last_seen(operator_client):
    insert_samples("default", 3)
    with connection.cursor() as cursor:
        # The leader's last sample of "legacy" (an undeclared queue it has stopped sampling).
        cursor.execute(
            "INSERT INTO awa.queue_stat_samples (queue, sampled_at, available, scheduled, "
            "retryable, running, waiting_external, dlq, lag_s, completed, failed) "
            "VALUES ('legacy', now() - interval '5 minutes', 0, 120, 0, 0, 0, 0, 0, 0, 0)"
        )
    page = operator_client.get(reverse(PAGE))
    assert row_of(page, "legacy").scheduled == 120
    assert b'id="last-seen-legacy"' in page.content
    assert "last seen 5\xa0minutes ago" in page.content.decode()
    assert b'id="last-seen-default"' not in page.content


def test_drain_confirmation_counts_the_jobs_it_will_cancel(operator_client):
    finished = noop.enqueue_many([{"n": 0}])
    run_burst()
    assert awa.get_jobs(finished)[0].state == "completed"
    noop.enqueue_many([{"n": n} for n in range(3)])
    for n in range(2):
        awa.enqueue("tests.noop", args={"n": n}, run_at=timedelta(hours=1))
    awa.enqueue("tests.noop", args={"n": 9}, queue="email")

    confirm = operator_client.post(reverse(ACT), {"action": "drain", "queue": "default"})
    assert confirm.context["pending"] == 5
    assert "cancels the <strong>5 jobs</strong> of it" in confirm.content.decode()
    done = operator_client.post(
        reverse(ACT), {"action": "drain", "queue": "default", "confirmed": "on"}, follow=True
    )
    assert messages_of(done) == ["Queue default drained: 5 pending jobs cancelled."]
    again = operator_client.post(reverse(ACT), {"action": "drain", "queue": "default"})
    assert "cancels the <strong>0 jobs</strong> of it" in again.content.decode()


def test_ages_under_a_minute_are_given_to_the_second(operator_client):
    from django.utils import timezone

    from awa_django.templatetags.awa_admin import ago

    moment = timezone.now()
    assert ago(moment - timedelta(seconds=12)) == "12 seconds ago"
    assert ago(moment - timedelta(seconds=1.5)) == "1 second ago"
    assert ago(moment + timedelta(seconds=2)) == "just now"
    assert ago(moment - timedelta(minutes=3, seconds=5)) == "3\xa0minutes ago"

    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.queue_stat_samples (queue, sampled_at, available, scheduled, "
            "retryable, running, waiting_external, dlq, lag_s, completed, failed) "
            "VALUES ('default', clock_timestamp() - interval '20 seconds', 1, 0, 0, 0, 0, 0, 0,"
            " 0, 0)"
        )
    body = operator_client.get(reverse(PAGE)).content.decode()
    assert re.search(r"<td>2\d seconds ago</td>", body), body
    assert "0\xa0minutes" not in body


def ghost_sample() -> None:
    """The leader's sample of "ghost": a queue no setting declares, with no job and no control
    row (emptied after the sample, by another service)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.queue_stat_samples (queue, sampled_at, available, scheduled, "
            "retryable, running, waiting_external, dlq, lag_s, completed, failed) "
            "VALUES ('ghost', now() - interval '1 minute', 0, 7, 0, 0, 0, 0, 0, 0, 0)"
        )


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"action": "pause"}, "Queue ghost paused: workers claim nothing from it."),
        ({"action": "resume"}, "Queue ghost resumed."),
        ({"action": "drain", "confirmed": "on"}, "Queue ghost drained: 0 pending jobs cancelled."),
    ],
    ids=["pause", "resume", "drain"],
)
def test_a_queue_known_only_from_the_leaders_samples_can_be_acted_on(
    operator_client, data, expected
):
    ghost_sample()
    page = operator_client.get(reverse(PAGE))
    assert b'id="pause-ghost"' in page.content and b'id="drain-ghost"' in page.content

    done = operator_client.post(reverse(ACT), {**data, "queue": "ghost"}, follow=True)

    assert messages_of(done) == [expected]
    assert row_of(done, "ghost").paused == (data["action"] == "pause")


def test_drain_of_a_queue_known_only_from_samples_asks_for_confirmation(operator_client):
    ghost_sample()
    confirm = operator_client.post(reverse(ACT), {"action": "drain", "queue": "ghost"})
    assert confirm.status_code == 200
    assert b"Yes, drain ghost" in confirm.content


def insert_rollups(resolution_s: int, queue: str, kind: str, count: int) -> None:
    """``count`` buckets of ``resolution_s`` back from now, 30 completions and 2 failures each;
    queue rows (kind '') with depths."""
    depth = "NULL" if kind else "5 + b"
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.queue_stat_rollups (resolution_s, queue, kind, bucket_at, completed, "
            f"failed, available, scheduled, retryable, running, dlq) SELECT %s, %s, %s, "
            "date_bin(make_interval(secs => %s), now(), timestamptz '2000-01-01 00:00:00+00') "
            f"- b * make_interval(secs => %s), 30, 2, {depth}, {depth}, 0, 1, 0 "
            "FROM generate_series(1, %s) b",
            [resolution_s, queue, kind, resolution_s, resolution_s, count],
        )


@pytest.mark.parametrize(
    ("window", "resolution_s", "words"),
    [("24h", 60, "last 24 hours"), ("7d", 900, "last 7 days")],
)
def test_longer_windows_chart_the_compacted_history(operator_client, window, resolution_s, words):
    insert_rollups(resolution_s, "default", "", 200)
    response = operator_client.get(reverse(PAGE), {"window": window})
    assert response.status_code == 200
    charts = {row.queue: charts for row, _, charts in response.context["rows"]}
    throughput, depth = charts["default"]
    assert f"default: throughput, {words}" in throughput and "<polyline" in throughput
    assert f"default: depth, {words}" in depth and "available" in depth
    # Drawn at 5 or 30 minutes a point, the rate is still 30 per bucket's minutes, the newest
    # step (still filling) included.
    rate = f"{30 / (resolution_s / 60):g}"
    assert f"completed: {rate} now, max {rate}" in throughput
    assert b"No compacted history in the " + words.encode() in response.content  # email
    # The selector is plain links (no JavaScript): this window is the one in bold.
    body = response.content.decode()
    assert f"<strong>{words}</strong>" in body
    assert '<a href="?window=1h&amp;view=queue">last hour</a>' in body
    assert f'<a href="?window={window}&amp;view=kind">per kind</a>' in body


def test_the_per_kind_view_charts_each_kinds_throughput(operator_client):
    insert_rollups(60, "default", "", 30)
    insert_rollups(60, "default", "tests.noop", 30)
    insert_rollups(60, "default", "tests.record", 10)
    response = operator_client.get(reverse(PAGE), {"view": "kind"})
    assert response.status_code == 200
    charts = {row.queue: charts for row, _, charts in response.context["rows"]}
    noop_chart, record_chart = charts["default"]
    assert "default / tests.noop: throughput, last hour" in noop_chart
    assert "default / tests.record: throughput, last hour" in record_chart
    assert "completed: 30 now, max 30" in noop_chart
    assert charts["email"] is None


@pytest.mark.parametrize(
    "query", [{"window": "2h"}, {"window": ""}, {"view": "worker"}, {"window": "7d", "view": "x"}]
)
def test_an_unknown_window_or_view_is_a_400(operator_client, query):
    response = operator_client.get(reverse(PAGE), query)
    assert response.status_code == 400
    assert b"window must be one of 1h, 24h, 7d and view one of queue, kind" in response.content
