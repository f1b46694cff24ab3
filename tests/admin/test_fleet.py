"""Descriptor pages (stale and drift badges) and the runtimes page (the current leader), with
real worker processes declaring what they serve."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

import awa_django as awa
from awa_django.maintenance.runtime_cleanup import RuntimeCleaner, RuntimeCleanupConfig
from awa_django.ops import descriptors, runtimes
from awa_django.storage.connections import open_pool
from awa_django.templatetags.awa_admin import elapsed, when
from tests.conftest import BackgroundWorker, wait_until

QUEUE_DESCRIPTORS = "admin:awa_django_queuedescriptor_changelist"
KIND_DESCRIPTORS = "admin:awa_django_kinddescriptor_changelist"
RUNTIMES = "admin:awa_django_runtimeinstance_changelist"


def worker_env(description: str) -> dict[str, str]:
    return {
        "AWA_OVERRIDES": json.dumps(
            {
                "QUEUES": {
                    "default": {"description": description, "owner": "payments"},
                    "email": {},
                },
                "RUNTIME_SNAPSHOT_INTERVAL_S": 0.5,
                "RUNTIME_STALE_AFTER_S": 30,
            }
        )
    }


def test_two_workers_declaring_a_queue_differently_show_drift(operator_client, worker_process):
    first = worker_process(env=worker_env("charges cards")).wait_ready()
    second = worker_process(env=worker_env("refunds cards")).wait_ready()
    wait_until(lambda: len([r for r in runtimes.list() if r.live]) == 2, timeout=30)
    # A worker reports its leadership with the snapshot after it won the election.
    wait_until(lambda: runtimes.leader() is not None, timeout=30)

    page = operator_client.get(reverse(QUEUE_DESCRIPTORS))

    assert page.status_code == 200
    by_queue = {d.queue: d for d, _ in page.context["rows"]}
    assert by_queue["default"].drift and not by_queue["email"].drift
    body = page.content.decode()
    default_row = body.split('id="queue-default"')[1].split("</tr>")[0]
    assert "drift" in default_row and "payments" in default_row
    # Each version is a line of a row of its own under the descriptor's, as wide as the table,
    # not a list wrapped inside the narrow status cell (which made the row four lines tall).
    assert "awa-drift" not in default_row
    versions = versions_row(body, "queue-default")
    assert '<td colspan="8"><ul class="awa-drift">' in versions
    assert versions.count("<li>") == 2 and "charges cards" in versions
    assert 'id="queue-email-versions"' not in body
    email_row = body.split('id="queue-email"')[1].split("</tr>")[0]
    assert "current" in email_row

    runtimes_page = operator_client.get(reverse(RUNTIMES))
    pids = {r.pid for r in runtimes_page.context["runtimes"]}
    assert {first.proc.pid, second.proc.pid} <= pids
    leader = runtimes_page.context["leader"]
    assert leader is not None and leader.pid in {first.proc.pid, second.proc.pid}
    assert f"pid {leader.pid}" in runtimes_page.content.decode()

    kinds = operator_client.get(reverse(KIND_DESCRIPTORS))
    # A kind from AWA["JOB_MODULES"] (tests.jobs) is declared like an app's jobs module's.
    assert "tests.always_fails" in {d.kind for d, _ in kinds.context["rows"]}


def test_a_stale_descriptor_shows_when_its_last_runtime_was_seen(operator_client):
    """Its "Refreshed" is the last snapshot of a runtime that declared it, kept once the leader
    deleted that silent runtime's row, not the start of the worker that wrote it (#36)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.queue_descriptors (queue, display_name, description, owner, "
            "dlq_enabled, descriptor_hash, changed_at, refreshed_at) VALUES ('reports', "
            "'Reports', '', '', false, 'h1', now() - interval '3 hours', "
            "now() - interval '3 hours')"
        )
        cursor.execute(
            "INSERT INTO awa.runtime_instances (instance_id, hostname, pid, version, started_at, "
            "last_seen_at, queues, in_flight, is_leader, healthy, shutting_down, queue_hashes, "
            "kind_hashes) VALUES ('crashed', 'h', 1, 'v', now() - interval '3 hours', "
            "now() - interval '10 minutes', '{}', 0, false, true, false, "
            "'{\"reports\": \"h1\"}', '{}') RETURNING last_seen_at"
        )
        (last_seen,) = cursor.fetchone()
        cursor.execute("SELECT changed_at FROM awa.queue_descriptors WHERE queue = 'reports'")
        (written,) = cursor.fetchone()

    def row() -> str:
        body = operator_client.get(reverse(QUEUE_DESCRIPTORS)).content.decode()
        return body.split('id="queue-reports"')[1].split("</tr>")[0]

    async def leader_cleanup() -> int:
        pool = await open_pool("default", max_size=1)
        try:
            cleaner = RuntimeCleaner(pool, RuntimeCleanupConfig(interval_s=60, stale_after_s=60))
            return (await cleaner.run_once()).deleted
        finally:
            await pool.close()

    expected = (
        f'<td class="awa-nowrap">{when(written)}</td><td class="awa-nowrap">{when(last_seen)}</td>'
    )
    assert "stale" in row() and row().endswith(expected)
    assert asyncio.run(leader_cleanup()) == 1
    assert "stale" in row() and row().endswith(expected)


def test_pages_without_runtimes_say_so(operator_client):
    runtimes_page = operator_client.get(reverse(RUNTIMES))
    assert runtimes_page.context["leader"] is None
    assert b"No live runtime holds the maintenance leadership" in runtimes_page.content
    assert operator_client.get(reverse(QUEUE_DESCRIPTORS)).status_code == 200


def test_fleet_pages_are_read_only_and_permission_checked(viewer_client, outsider_client):
    for name in (QUEUE_DESCRIPTORS, KIND_DESCRIPTORS, RUNTIMES):
        assert viewer_client.get(reverse(name)).status_code == 200
        assert outsider_client.get(reverse(name)).status_code == 403


RUNTIMES = "admin:awa_django_runtimeinstance_changelist"


def test_runtimes_page_says_when_nothing_is_running(operator_client):
    page = operator_client.get(reverse(RUNTIMES))
    assert page.status_code == 200 and b"No attempt is running." in page.content


def test_running_jobs_per_worker_with_links_elapsed_time_and_a_progress_bar(operator_client):
    # tests.sleepy reports no progress itself, so the progress written here stays as written.
    job_id = awa.enqueue("tests.sleepy", args={"seconds": 10})
    worker = BackgroundWorker(maintenance=False, queues={"default": 2}).start()
    try:
        wait_until(lambda: awa.get_job(job_id).state == "running")
        # The page rounds a fraction a job reported instead of printing every digit.
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO awa.attempt_state (job_id, run_lease, progress) VALUES (%s, %s, "
                '\'{"percent": 3.2333333333333334, "message": "page 3 of 90"}\')',
                [job_id, awa.get_job(job_id).run_lease],
            )

        page = operator_client.get(reverse(RUNTIMES))

        body = page.content.decode()
        [(holder, runtime, [attempt])] = page.context["running"]
        assert holder == attempt.claimed_by and runtime is not None
        where = f"on {runtime.hostname}, pid {runtime.pid}"
        assert f"Worker <code>{holder}</code> {where}: 1 running" in body
        assert attempt.job_id == job_id and attempt.percent == 3.2333333333333334
        row = body[body.index(f'id="running-job-{job_id}"') :].split("</tr>")[0]
        assert f'href="/admin/awa_django/job/{job_id}/"' in row
        assert '<progress max="100" value="3">' in row and "3%" in row and "3.23" not in row
        assert "page 3 of 90" in row and "tests.sleepy" in row
        # Elapsed since the claim, to the second ("4 s"), not timesince's "0 minutes".
        assert re.search(r'<td title="claimed [^"]+">\d+ s</td>', row), row
    finally:
        worker.stop()


def test_attempts_of_a_worker_that_never_reported_in_are_listed_under_its_id(operator_client):
    job_id = awa.enqueue("tests.sleepy", args={"seconds": 10})
    # A claim by a process that has no runtime row (it crashed before its first snapshot).
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM awa.claim_ready('default', 1, 'ghost-worker', 60, 0, false)")
    page = operator_client.get(reverse(RUNTIMES))
    [(worker, runtime, [attempt])] = page.context["running"]
    assert (worker, runtime, attempt.job_id) == ("ghost-worker", None, job_id)
    assert "not reporting" in page.content.decode().split("ghost-worker")[1].split("</h3>")[0]


def test_elapsed_counts_seconds_then_minutes_then_hours():
    now = timezone.now()
    assert [elapsed(now - timedelta(seconds=s)) for s in (0, 42, 192, 7500, -5)] == [
        "0 s",
        "42 s",
        "3 min 12 s",
        "2 h 5 min",
        "0 s",
    ]


def versions_row(body: str, row_id: str) -> str:
    """The row under a drifting descriptor's row that lists its versions."""
    return body.split(f'id="{row_id}-versions"')[1].split("</tr>")[0]


def stored_description() -> str | None:
    """The default queue's description as its stored descriptor (the last publisher's) says."""
    return next((d.description for d in descriptors.queues() if d.queue == "default"), None)


def page_while_stored(client, description: str, **settings_overrides):
    """The descriptors page, rendered while ``description`` is the stored one before and after:
    either worker may publish its own descriptor again at any snapshot."""

    def render():
        wait_until(lambda: stored_description() == description, timeout=30)
        with override_settings(**settings_overrides):
            page = client.get(reverse(QUEUE_DESCRIPTORS))
        return page if stored_description() == description else None

    pages = []
    wait_until(lambda: pages.append(render()) or pages[-1] is not None, timeout=60)
    return pages[-1]


def test_drift_shows_the_differing_values_and_who_declares_them(operator_client, worker_process):
    first = worker_process(env=worker_env("charges cards")).wait_ready()
    second = worker_process(env=worker_env("refunds cards")).wait_ready()
    wait_until(lambda: len([r for r in runtimes.list() if r.live]) == 2, timeout=30)
    ids = {r.pid: r.instance_id for r in runtimes.list()}
    first_id, second_id = ids[first.proc.pid], ids[second.proc.pid]

    # This process declares the queue as the first worker does: both versions have values
    # (the stored descriptor is the last one written, the second worker's).
    overrides = json.loads(worker_env("charges cards")["AWA_OVERRIDES"])
    page = page_while_stored(operator_client, "refunds cards", AWA={**settings.AWA, **overrides})

    [versions] = [v for d, v in page.context["rows"] if d.queue == "default"]
    assert {(v.instances, v.source) for v in versions} == {
        ((first_id,), "this process's code"),
        ((second_id,), "stored descriptor"),
    }
    # Only what differs is shown: both declare the same owner.
    assert sorted(v.fields["description"] for v in versions) == ["charges cards", "refunds cards"]
    assert all(list(v.fields) == ["description"] for v in versions)
    row = versions_row(page.content.decode(), "queue-default")
    assert "&ldquo;charges cards&rdquo;" in row and "&ldquo;refunds cards&rdquo;" in row
    assert first_id in row and second_id in row

    # Seen from a process that declares neither, the version that is not stored has the values
    # its worker recorded.
    page = page_while_stored(operator_client, "refunds cards")
    [versions] = [v for d, v in page.context["rows"] if d.queue == "default"]
    assert {(v.instances, v.source, v.fields["description"]) for v in versions} == {
        ((first_id,), "recorded by its workers", "charges cards"),
        ((second_id,), "stored descriptor", "refunds cards"),
    }
    row = versions_row(page.content.decode(), "queue-default")
    assert "&ldquo;charges cards&rdquo;" in row and "&ldquo;refunds cards&rdquo;" in row


def test_a_version_nobody_recorded_shows_its_hash(operator_client, worker_process):
    """Workers of awa_django 0.1.0 report hashes and record no values."""
    worker_process(env=worker_env("charges cards")).wait_ready()
    wait_until(lambda: stored_description() == "charges cards", timeout=30)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.runtime_instances (instance_id, hostname, pid, version, started_at, "
            "last_seen_at, queues, in_flight, is_leader, healthy, shutting_down, queue_hashes, "
            "kind_hashes) VALUES ('old-release', 'h', 1, '0.1.0', now(), now() + interval "
            "'1 hour', '{}', 0, false, true, false, '{\"default\": \"0123456789abcdef\"}', '{}')"
        )
    page = operator_client.get(reverse(QUEUE_DESCRIPTORS))
    [versions] = [v for d, v in page.context["rows"] if d.queue == "default"]
    by_instance = {v.instances: v for v in versions}
    assert by_instance[("old-release",)].fields is None
    assert by_instance[("old-release",)].source is None
    [known] = [v for v in versions if v.fields is not None]
    assert known.fields["description"] == "charges cards"
    row = versions_row(page.content.decode(), "queue-default")
    assert "values not known (hash <code>0123456789ab…</code>)" in row
    assert "workers of awa_django 0.1.0" in row
