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
from awa_django.maintenance.runtime_cleanup import RuntimeCleaner, RuntimeCleanupConfig
from awa_django.ops import descriptors as awa_descriptors
from awa_django.storage.connections import open_pool
from awa_django.storage.runtime import delete_runtime, publish_declarations
from awa_django.storage.statement import run_async
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
            cleaner = RuntimeCleaner(pool, RuntimeCleanupConfig(interval_s=60, stale_after_s=5.0))
            return (await cleaner.run_once()).deleted
        finally:
            await pool.close()

    assert asyncio.run(cleanup()) == 1
    assert awa.runtimes.list() == []


def test_the_leader_deletes_recorded_versions_that_nothing_declares_any_more():
    runtime_row = (
        "INSERT INTO awa.runtime_instances (instance_id, hostname, pid, version, started_at, "
        "last_seen_at, queues, in_flight, is_leader, healthy, shutting_down, queue_hashes, "
        "kind_hashes) VALUES (%s, 'h', 1, 'v', now(), now() - %s::interval, '{}', 0, false, "
        "true, false, %s, %s)"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.queue_descriptors (queue, display_name, description, owner, "
            "dlq_enabled, descriptor_hash) VALUES ('default', 'D', 'stored', '', false, 'h-stored')"
        )
        cursor.execute(runtime_row, ["live", "0 s", '{"default": "h-live"}', "{}"])
        cursor.execute(runtime_row, ["silent", "1 hour", '{"default": "h-silent"}', '{"k": "h-k"}'])
        cursor.execute(
            "INSERT INTO awa.declared_versions (described, name, descriptor_hash, fields, "
            "first_declared_at) "
            "SELECT d, n, h, '{}', now() - interval '1 hour' FROM (VALUES "
            "('queue', 'default', 'h-live'), ('queue', 'default', 'h-stored'),"
            "('queue', 'default', 'h-silent'), ('kind', 'k', 'h-k'),"
            "('queue', 'default', 'h-gone'), ('kind', 'default', 'h-live')) AS v (d, n, h)"
        )
        # Declared by no runtime row yet, but just recorded: a starting worker's.
        cursor.execute(
            "INSERT INTO awa.declared_versions (described, name, descriptor_hash, fields) "
            "VALUES ('queue', 'email', 'h-starting', '{}')"
        )

    async def cleanup() -> tuple[int, int]:
        pool = await open_pool("default", max_size=1)
        try:
            cleaner = RuntimeCleaner(pool, RuntimeCleanupConfig(interval_s=60, stale_after_s=5.0))
            result = await cleaner.run_once()
            return result.deleted, result.versions_deleted
        finally:
            await pool.close()

    # The silent runtime's row goes first, then every version only it declared; a hash counts
    # for the queue or kind it was declared for, not for another of the same name.
    assert asyncio.run(cleanup()) == (1, 4)
    assert set(recorded_versions()) == {
        ("queue", "default", "h-live"),
        ("queue", "default", "h-stored"),
        ("queue", "email", "h-starting"),
    }
    assert asyncio.run(cleanup()) == (0, 0)


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

    # Written an hour ago, and no live runtime declares them any more.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE awa.queue_descriptors "
            "SET changed_at = now() - interval '1 hour', refreshed_at = now() - interval '1 hour'"
        )
    assert all(q.stale for q in awa.descriptors.queues())


def descriptor_row_versions() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'queue:' || queue, xmin::text FROM awa.queue_descriptors "
            "UNION ALL SELECT 'kind:' || kind, xmin::text FROM awa.kind_descriptors "
            "UNION ALL SELECT 'version:' || described || ':' || name || ':' || descriptor_hash, "
            "xmin::text FROM awa.declared_versions"
        )
        return dict(cursor.fetchall())


def recorded_versions() -> dict[tuple[str, str, str], dict]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT described, name, descriptor_hash, fields::text FROM awa.declared_versions"
        )
        return {(d, n, h): json.loads(f) for d, n, h, f in cursor.fetchall()}


def test_a_worker_records_the_fields_behind_each_hash_it_declares():
    worker = BackgroundWorker(queues={"default": 1}).start()
    try:
        wait_until(lambda: awa.runtimes.list() != [])
        recorded = recorded_versions()
        queues = {q.queue: q for q in awa.descriptors.queues()}
        kinds = {k.kind: k for k in awa.descriptors.kinds()}
    finally:
        worker.stop()
    assert recorded[("queue", "default", queues["default"].descriptor_hash)] == {
        "display_name": "Default",
        "description": "Everything else",
        "owner": "core",
        "dlq": False,
    }
    assert recorded[("queue", "email", queues["email"].descriptor_hash)]["dlq"] is True
    described = kinds["tests.fails_through_lease"]
    assert (
        recorded[("kind", described.kind, described.descriptor_hash)]
        == described.declaration.fields
    )
    assert {(d, n) for d, n, _ in recorded} == {("queue", q) for q in queues} | {
        ("kind", k) for k in kinds
    }


def test_snapshots_keep_descriptors_fresh_without_rewriting_unchanged_rows():
    worker = BackgroundWorker(queues={"default": 1}).start()
    try:
        wait_until(lambda: awa.runtimes.list() != [])
        written = descriptor_row_versions()
        assert any(key.startswith("version:") for key in written)
        seen = awa.runtimes.list()[0].last_seen_at
        wait_until(lambda: awa.runtimes.list()[0].last_seen_at > seen)
        # Under a pinned MVCC horizon each rewrite would stay behind as a dead tuple.
        assert descriptor_row_versions() == written
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE awa.queue_descriptors SET changed_at = now() - interval '1 hour', "
                "refreshed_at = now() - interval '1 hour'"
            )
        # The live worker's snapshots vouch for what it declares.
        queues = {q.queue: q for q in awa.descriptors.queues()}
        assert not queues["default"].stale
        assert queues["default"].refreshed_at >= seen
        last_seen = awa.runtimes.list()[0].last_seen_at
    finally:
        worker.stop()
    # Stale at once, the code that declared them having stopped; refreshed when it last ran.
    queues = {q.queue: q for q in awa.descriptors.queues()}
    assert all(q.stale for q in queues.values())
    assert queues["default"].refreshed_at >= last_seen


def test_a_stale_descriptor_was_refreshed_when_its_last_runtime_was_seen():
    """Not when it was written: the snapshots of the runtimes that declared it refreshed it
    until they were gone, by a clean exit or the leader's cleanup of a silent runtime (#36)."""
    runtime_row = (
        "INSERT INTO awa.runtime_instances (instance_id, hostname, pid, version, started_at, "
        "last_seen_at, queues, in_flight, is_leader, healthy, shutting_down, queue_hashes, "
        "kind_hashes) VALUES (%s, 'h', 1, 'v', now() - interval '3 hours', "
        "now() - %s::interval, '{}', 0, false, true, false, %s, %s)"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.queue_descriptors (queue, display_name, description, owner, "
            "dlq_enabled, descriptor_hash, changed_at, refreshed_at) VALUES "
            "('default', 'D', '', '', false, 'h1', now() - interval '3 hours', "
            "now() - interval '3 hours'), "
            "('email', 'E', '', '', false, 'h2', now() - interval '3 hours', "
            "now() - interval '3 hours')"
        )
        cursor.execute(
            "INSERT INTO awa.kind_descriptors (kind, queue, description, owner, docs_url, "
            "descriptor_hash, changed_at, refreshed_at) VALUES ('k', 'default', '', '', '', "
            "'h3', now() - interval '3 hours', now() - interval '3 hours')"
        )
        # Two silent runtimes (crashed), the newer last seen 10 minutes ago.
        cursor.execute(runtime_row, ["older", "20 minutes", '{"default": "h1"}', '{"k": "h3"}'])
        cursor.execute(runtime_row, ["newer", "10 minutes", '{"default": "h1"}', "{}"])
        cursor.execute(
            "SELECT (SELECT last_seen_at FROM awa.runtime_instances WHERE instance_id = 'older'), "
            "(SELECT last_seen_at FROM awa.runtime_instances WHERE instance_id = 'newer'), "
            "(SELECT refreshed_at FROM awa.queue_descriptors WHERE queue = 'email')"
        )
        older_seen, newer_seen, written = cursor.fetchone()

    def refreshed() -> dict[str, object]:
        queues = {f"queue {d.queue}": d for d in awa.descriptors.queues()}
        kinds = {f"kind {d.kind}": d for d in awa.descriptors.kinds()}
        assert all(d.stale for d in [*queues.values(), *kinds.values()])
        return {name: d.refreshed_at for name, d in {**queues, **kinds}.items()}

    # Read while their rows are still there...
    expected = {"queue default": newer_seen, "queue email": written, "kind k": older_seen}
    assert refreshed() == expected

    async def cleanup() -> int:
        pool = await open_pool("default", max_size=1)
        try:
            cleaner = RuntimeCleaner(pool, RuntimeCleanupConfig(interval_s=60, stale_after_s=5.0))
            return (await cleaner.run_once()).deleted
        finally:
            await pool.close()

    # ... and after the leader deleted them.
    assert asyncio.run(cleanup()) == 2
    assert awa.runtimes.list() == []
    assert refreshed() == expected


def test_two_workers_with_different_descriptions_show_drift(worker_process):
    def env(description: str) -> dict[str, str]:
        queues = {**QUEUES, "default": {**QUEUES["default"], "description": description}}
        return {"AWA_OVERRIDES": json.dumps({"QUEUES": queues, **FAST})}

    first = worker_process("--queue", "default", env=env("first")).wait_ready()
    second = worker_process("--queue", "default", env=env("second")).wait_ready()

    def default_queue() -> awa.descriptors.QueueDescriptorRecord:
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


def test_a_stopping_worker_and_a_publishing_one_take_descriptor_rows_in_one_order():
    """A withdrawn runtime's last snapshot is carried into every descriptor it declared while
    another worker upserts changed descriptors, which takes the rows in key order: the carry
    locks them in that order too, so neither waits on the other in a cycle (deadlock)."""
    names = [f"q{n:03d}" for n in range(300)]
    rounds = 8

    def prepare(round_: int) -> None:
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM awa.queue_descriptors")
            # Stored in reverse key order, so a scan in storage order is not key order.
            cursor.execute(
                "INSERT INTO awa.queue_descriptors (queue, display_name, description, owner, "
                "dlq_enabled, descriptor_hash, changed_at, refreshed_at) "
                "SELECT n, '', '', '', false, 'old', now() - interval '1 hour', "
                "now() - interval '1 hour' FROM unnest(%s::text[]) AS n ORDER BY n DESC",
                [names],
            )
            cursor.execute(
                "INSERT INTO awa.runtime_instances (instance_id, hostname, pid, version, "
                "started_at, last_seen_at, queues, in_flight, is_leader, healthy, "
                "shutting_down, queue_hashes, kind_hashes) VALUES (%s, 'h', 1, 'v', now(), "
                "now(), '{}', 0, false, true, false, %s, '{}')",
                [f"stopping-{round_}", json.dumps(dict.fromkeys(names, "old"))],
            )

    async def race(round_: int) -> None:
        declared = awa_descriptors.Declarations(
            queues=tuple(
                awa_descriptors.QueueDeclaration(
                    queue=name, display_name="", description=f"round {round_}", owner="", dlq=False
                )
                for name in names
            )
        )
        pool = await open_pool("default", max_size=2)
        try:
            async with pool.connection() as stopping, pool.connection() as publishing:
                await asyncio.gather(
                    run_async(stopping, delete_runtime(instance_id=f"stopping-{round_}")),
                    run_async(publishing, publish_declarations(declared)),
                )
        finally:
            await pool.close()

    for round_ in range(rounds):
        prepare(round_)
        asyncio.run(race(round_))  # a deadlock would raise here
        assert awa.runtimes.list() == []
        assert {d.description for d in awa.descriptors.queues()} == {f"round {round_}"}
