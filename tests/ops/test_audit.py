"""``manage.py awa_audit`` and ``awa.audit.run()``: each invariant broken on purpose (rows
written behind the substrate's back, as a bug or a bad restore would) is reported with the jobs
concerned, and a database worked normally, a late commit in a recorded hole included, holds."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

import awa_django as awa
from awa_django.ops import audit
from tests.ops.helpers import manage

pytestmark = pytest.mark.usefixtures("awa_db", "storage_kinds")


def put(n: int = 0) -> int:
    return awa.enqueue("k.audit", args={"n": n})


def claim(limit: int = 10) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT job_id FROM awa.claim_ready('default', %s, 'audit-test', 0, 0, false)",
            [limit],
        )
        return [row[0] for row in cursor.fetchall()]


def sql(statement: str, params: list[object] | None = None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def broken() -> dict[str, tuple[int, ...]]:
    return {f.name: f.job_ids for f in audit.run().findings if not f.held}


def receipt_for(job_id: int, commit_seq: int, lane_seq_offset: int = 0) -> None:
    """A receipt written by hand for the job's ready row, at the lane position given."""
    sql(
        "INSERT INTO awa.claim_receipts (queue, priority, shard, commit_seq, lane_seq,"
        " ready_slot, job_id, run_lease, attempt, claimed_by)"
        " SELECT queue, priority, shard, %s, lane_seq + %s, ready_slot, job_id, run_lease + 1,"
        " attempt + 1, 'by hand' FROM awa.ready_entries WHERE job_id = %s",
        [commit_seq, lane_seq_offset, job_id],
    )


def test_a_database_worked_normally_holds_every_invariant():
    first, second = put(1), put(2)
    assert claim(1) == [first]
    awa.enqueue("k.audit", args={"n": 3}, run_at=timezone.now() + timedelta(hours=1))
    report = audit.run()
    assert report.held, report.as_dict()
    assert [f.name for f in report.findings] == [
        "one_place",
        "one_open_attempt",
        "published",
        "claimable",
    ]
    result = manage("awa_audit")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == "all invariants hold"
    assert claim() == [second]


def test_a_job_in_two_places_is_reported_and_the_command_fails():
    job_id = put()
    # Deferred as well as ready: a promotion that did not delete its source, say.
    sql(
        "INSERT INTO awa.deferred_jobs (job_id, state, kind, queue, priority, args, attempt,"
        " run_lease, max_attempts, run_at, created_at, metadata, tags, errors)"
        " SELECT job_id, 'scheduled', kind, queue, priority, args, attempt, run_lease,"
        " max_attempts, now() + interval '1 hour', created_at, metadata, tags, errors"
        " FROM awa.ready_entries WHERE job_id = %s",
        [job_id],
    )
    assert broken() == {"one_place": (job_id,)}
    result = manage("awa_audit")
    assert result.returncode == 1
    assert "BROKEN one_place: " in result.stdout and f"1 job(s): {job_id}" in result.stdout
    assert result.stdout.splitlines()[-1] == "invariants broken"
    as_json = manage("awa_audit", "--json")
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    assert report["held"] is False
    (one_place,) = [i for i in report["invariants"] if i["name"] == "one_place"]
    assert one_place["broken"] == 1 and one_place["job_ids"] == [job_id]


def test_two_open_attempts_and_a_lease_without_one_are_reported():
    job_id = put()
    assert claim() == [job_id]
    receipt_for(job_id, commit_seq=999, lane_seq_offset=1)  # a second open attempt
    sql(
        "INSERT INTO awa.leases (job_id, run_lease, lease_slot, ready_slot, queue, priority,"
        " shard, lane_seq, claimed_by) VALUES (424242, 1, 0, 0, 'default', 2, 0, 1, 'ghost')"
    )
    found = broken()
    assert found["one_open_attempt"] == (job_id, 424242)
    assert found["one_place"] == (job_id,)


def test_a_ready_row_no_lane_commit_covers_is_reported():
    job_id = put()
    # The same row again, by hand and without announce: no trigger publishes it.
    sql(
        "INSERT INTO awa.ready_entries (queue, priority, shard, lane_seq, ready_slot,"
        " ready_generation, job_id, kind, args, attempt, run_lease, max_attempts, run_at,"
        " created_at, metadata, tags, errors)"
        " SELECT queue, priority, shard, lane_seq + 1000000, ready_slot, ready_generation,"
        " job_id + 1000000, kind, args, attempt, run_lease, max_attempts, run_at, created_at,"
        " metadata, tags, errors FROM awa.ready_entries WHERE job_id = %s",
        [job_id],
    )
    assert broken() == {"published": (job_id + 1000000,)}


def test_a_row_behind_its_lane_cursor_is_reported_unless_a_recorded_hole_covers_it():
    behind, ahead = put(1), put(2)  # positions 1 and 2
    receipt_for(ahead, commit_seq=2)  # the cursor jumps over position 1
    assert broken() == {"claimable": (behind,)}
    # A late commit in a recorded hole is claimed first by the next claim: not stuck.
    sql(
        "INSERT INTO awa.lane_holes (queue, priority, shard, first_seq, last_seq)"
        " SELECT queue, priority, shard, 1, 1 FROM awa.ready_entries WHERE job_id = %s",
        [behind],
    )
    assert broken() == {}
    assert claim() == [behind]
