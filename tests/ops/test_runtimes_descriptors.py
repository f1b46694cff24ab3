"""Runtime snapshots, stale-runtime cleanup, and descriptors with their stale and drift state,
with in-process workers and real worker subprocesses."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from django.db import connection
from django.test import override_settings

import awa_django as awa
from awa_django.maintenance.instance_cleanup import InstanceCleaner, InstanceCleanupConfig
from awa_django.worker.connections import open_pool
from awa_django.worker.reporter import package_version
from tests.conftest import BackgroundWorker, run_burst, wait_until
from tests.jobs import sleepy

pytestmark = pytest.mark.usefixtures("awa_db")

FAST = {
    "RUNTIME_SNAPSHOT_INTERVAL_S": 0.2,
    "RUNTIME_STALE_AFTER_S": 5.0,
    "LEADER_ELECTION_INTERVAL_S": 0.1,
    "POLL_INTERVAL_S": 0.1,
}
QUEUES = {
    "default": {"display_name": "Default", "description": "Everything else", "owner": "core"},
    "email": {"dlq": True, "owner": "growth"},
}


@pytest.fixture(autouse=True)
def fast_snapshots():
    with override_settings(AWA={"QUEUES": QUEUES, **FAST}):
        yield


def test_a_worker_reports_its_snapshot_and_deletes_it_on_exit():
    worker = BackgroundWorker(queues={"default": 3}).start()
    try:
        wait_until(lambda: any(r.is_leader for r in awa.runtimes.list()))
        (row,) = awa.runtimes.list()
        assert row.instance_id == worker.runtime.identity
        assert (row.pid, row.version, row.queues) == (
            os.getpid(),
            package_version(),
            {"default": 3},
        )
        assert row.live and row.healthy and not row.shutting_down
        assert awa.runtimes.leader().instance_id == row.instance_id

        sleepy.enqueue(seconds=1.5)
        wait_until(lambda: awa.runtimes.list()[0].in_flight == 1)
    finally:
        worker.stop()
    assert awa.runtimes.list() == [] and awa.runtimes.leader() is None


def test_the_leader_deletes_runtime_rows_gone_silent():
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.runtime_instances (instance_id, hostname, pid, version, started_at, "
            "last_seen_at, queues, in_flight, is_leader, healthy, shutting_down, queue_hashes, "
            "kind_hashes) VALUES ('ghost', 'h', 1, 'v', now(), now() - interval '1 hour', '{}', "
            "0, true, true, false, '{}', '{}')"
        )
    ghost = awa.runtimes.list()[0]
    assert not ghost.live and awa.runtimes.leader() is None

    async def cleanup() -> int:
        pool = await open_pool("default", max_size=1)
        try:
            cleaner = InstanceCleaner(pool, InstanceCleanupConfig(interval_s=60, stale_after_s=5.0))
            return (await cleaner.run_once()).deleted
        finally:
            await pool.close()

    assert asyncio.run(cleanup()) == 1
    assert awa.runtimes.list() == []


def test_workers_publish_queue_and_kind_descriptors_and_dlq_policy():
    run_burst()
    queues = {q.queue: q for q in awa.descriptors.queues()}
    assert (queues["default"].display_name, queues["default"].owner) == ("Default", "core")
    assert queues["email"].dlq_enabled and not queues["default"].dlq_enabled
    assert not queues["default"].stale and not queues["default"].drift
    kinds = {k.kind: k for k in awa.descriptors.kinds()}
    described = kinds["tests.fails_through_lease"]
    assert (described.owner, described.docs_url) == ("tests", "https://example.invalid/fails")
    assert described.description.startswith("Fails while")
    assert {q.queue: q.dlq_enabled for q in awa.queues.stats()} == {
        "default": False,
        "email": True,
    }

    with connection.cursor() as cursor:
        cursor.execute("UPDATE awa.queue_descriptors SET refreshed_at = now() - interval '1 hour'")
    assert all(q.stale for q in awa.descriptors.queues())


def descriptor_row_versions() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'queue:' || queue, xmin::text FROM awa.queue_descriptors "
            "UNION ALL SELECT 'kind:' || kind, xmin::text FROM awa.kind_descriptors"
        )
        return dict(cursor.fetchall())


def test_snapshots_keep_descriptors_fresh_without_rewriting_unchanged_rows():
    worker = BackgroundWorker(queues={"default": 1}).start()
    try:
        wait_until(lambda: awa.runtimes.list() != [])
        written = descriptor_row_versions()
        seen = awa.runtimes.list()[0].last_seen_at
        wait_until(lambda: awa.runtimes.list()[0].last_seen_at > seen)
        # Under a pinned MVCC horizon each rewrite would stay behind as a dead tuple.
        assert descriptor_row_versions() == written
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE awa.queue_descriptors SET refreshed_at = now() - interval '1 hour'"
            )
        # The live worker's snapshots vouch for what it declares.
        queues = {q.queue: q for q in awa.descriptors.queues()}
        assert not queues["default"].stale
        assert queues["default"].refreshed_at >= seen
    finally:
        worker.stop()
    assert all(q.stale for q in awa.descriptors.queues())


def test_two_workers_with_different_descriptions_show_drift(worker_process):
    def env(description: str) -> dict[str, str]:
        queues = {**QUEUES, "default": {**QUEUES["default"], "description": description}}
        return {"AWA_OVERRIDES": json.dumps({"QUEUES": queues, **FAST})}

    first = worker_process("--queue", "default", env=env("first")).wait_ready()
    second = worker_process("--queue", "default", env=env("second")).wait_ready()

    def default_queue() -> awa.descriptors.QueueDescriptor:
        return next(q for q in awa.descriptors.queues() if q.queue == "default")

    wait_until(lambda: default_queue().drift)
    drifted = default_queue()
    assert len(drifted.runtime_hashes) == 2 and len(set(drifted.runtime_hashes.values())) == 2
    assert not drifted.stale
    email = next(q for q in awa.descriptors.queues() if q.queue == "email")
    assert not email.drift  # both declare email alike
    assert len([r for r in awa.runtimes.list() if r.live]) == 2

    second.proc.terminate()
    assert second.wait() == 0
    wait_until(lambda: not default_queue().drift)
    first.proc.terminate()
    assert first.wait() == 0
