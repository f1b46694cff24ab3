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
from awa_django.testing import run_jobs
from tests.ops.helpers import manage
from tests.workflows.jobs import add, fail

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
        "ring_cursor",
        "ring_slots",
        "unique_claims",
        "workflow_steps",
        "workflow_state",
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
    # In id order: the job may be older or newer than the ghost lease, after earlier tests.
    assert found["one_open_attempt"] == tuple(sorted((job_id, 424242)))
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


def rotate_and_prune() -> tuple[str, str]:
    """One maintenance pass over the queue ring: rotate, then prune everything retention
    allows (no retention)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT awa.rotate_queue_ring(1000)")
        rotated = cursor.fetchone()[0]
        cursor.execute("SELECT awa.prune_queue_ring(0, 0, 1000)")
        return rotated, cursor.fetchone()[0]


def complete(job_ids: list[int]) -> None:
    for job_id in job_ids:
        sql(
            "INSERT INTO awa.done_entries (job_id, run_lease, ready_slot, queue, priority, shard,"
            " lane_seq, attempt, outcome)"
            " SELECT job_id, run_lease, ready_slot, queue, priority, shard, lane_seq, attempt,"
            " 'completed' FROM awa.claim_receipts WHERE job_id = %s",
            [job_id],
        )


def test_a_ring_that_turned_over_many_times_holds_the_ring_invariants():
    # Five laps of the four-slot ring, each slot entered only once prune emptied it.
    for n in range(20):
        job_id = put(n)
        assert claim() == [job_id]
        complete([job_id])
        assert rotate_and_prune()[0] == "rotated"
    put(99)  # a pending row in the current slot
    assert audit.run().held, audit.run().as_dict()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.queue_ring_rotations")
        assert cursor.fetchone()[0] == 21


def test_a_ring_ledger_that_skips_a_slot_or_leaves_the_ring_is_reported():
    put()
    assert rotate_and_prune()[0] == "rotated"  # generation 1 on slot 1
    # Generation 2 on slot 3 (slot 2 skipped), generation 3 on slot 9 (no such slot).
    sql("INSERT INTO awa.queue_ring_rotations (generation, slot) VALUES (2, 3), (3, 9)")
    found = {f.name: f for f in audit.run().findings if not f.held}
    assert list(found) == ["ring_cursor"]
    assert found["ring_cursor"].unit == "generation"
    assert found["ring_cursor"].ids == (2, 3) and found["ring_cursor"].job_ids == ()
    result = manage("awa_audit")
    assert result.returncode == 1
    assert "BROKEN ring_cursor: " in result.stdout and "2 generation(s): 2, 3" in result.stdout


def test_an_empty_ring_ledger_is_reported():
    sql("DELETE FROM awa.lease_ring_rotations")
    found = {f.name: f for f in audit.run().findings if not f.held}
    assert list(found) == ["ring_cursor"]
    assert found["ring_cursor"].broken == 1 and found["ring_cursor"].ids == ()


def test_a_row_that_survived_its_slots_truncation_is_reported():
    old = put(1)  # generation 0, slot 0
    for _ in range(4):
        # Round the ring back to slot 0 without pruning it: the ledger alone, as a restore
        # of the ledger without the ring's tables (or a prune that lost its truncate) leaves it.
        sql(
            "INSERT INTO awa.queue_ring_rotations (generation, slot)"
            " SELECT generation + 1, (slot + 1) % 4 FROM awa.queue_ring_rotations"
            " ORDER BY generation DESC LIMIT 1"
        )
    fresh = put(2)  # generation 4, slot 0: the current lap
    assert broken() == {"ring_slots": (old,)}
    assert fresh != old


def test_a_receipt_closure_or_tombstone_apart_from_its_ready_row_is_reported():
    claimed, cancelled = put(1), put(2)
    assert claim(1) == [claimed]
    complete([claimed])
    assert awa.cancel(cancelled)
    # Their ready rows go, as a truncate of a slot that held only them would take them.
    sql("DELETE FROM awa.ready_entries WHERE job_id IN (%s, %s)", [claimed, cancelled])
    assert broken() == {"ring_slots": (claimed, cancelled)}


def unique_put(n: int) -> int:
    return awa.enqueue("k.audit", args={"n": n}, unique=awa.Unique(by_args=True))


def test_unique_claims_matching_their_holders_hold_even_once_the_holder_is_gone():
    first = unique_put(1)
    assert claim(1) == [first]
    complete([first])
    # The holder of the key is pruned with its slot: the claim is released, not broken.
    assert rotate_and_prune() == ("rotated", "pruned")
    unique_put(2)
    assert awa.get_job(first) is None
    assert audit.run().held, audit.run().as_dict()


def test_a_job_holding_two_keys_or_a_claim_of_another_kind_or_id_is_reported():
    holder, other = unique_put(1), unique_put(2)
    plain = put(3)
    # A second key for the holder; the other's key moved to a job of another kind; a key
    # naming a job id never issued.
    sql(
        "INSERT INTO awa.unique_claims (unique_key, job_id, kind, queue, states)"
        " VALUES ('\\x01', %s, 'k.audit', 'default', '{available}'),"
        " ('\\x02', %s, 'k.audit', 'default', '{available}')",
        [holder, 10**12],
    )
    sql("UPDATE awa.unique_claims SET kind = 'k.other' WHERE job_id = %s", [other])
    assert broken() == {"unique_claims": (holder, other, 10**12)}
    assert plain not in broken()["unique_claims"]


def step_ids(workflow_id: int) -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, job_id FROM awa.workflow_steps WHERE workflow_id = %s", [workflow_id]
        )
        return dict(cursor.fetchall())


def test_workflows_part_run_and_finished_hold_the_workflow_invariants():
    finished = awa.chord([awa.call(add, x=n) for n in (1, 2)], awa.call(add, x=3)).enqueue()
    run_jobs()
    running = (
        awa.Workflow("part-run")
        .step("a", add, args={"x": 1})
        .step("b", add, args={"x": 2}, after=["a"])
        .step("c", add, args={"x": 3}, after=["a", "b"])
        .step("d", fail)
        .step("e", add, args={"x": 4}, after=["d"], ignore=["d"])
        .enqueue()
    )
    run_jobs(max_jobs=1)  # "a" completes: "b" released, "c" waits for "b" alone
    assert awa.get_workflow(finished.workflow_id).state == "completed"
    assert awa.get_workflow(running.workflow_id).state == "running"
    assert audit.run().held, audit.run().as_dict()


def test_a_held_step_whose_counter_is_off_is_reported():
    run = (
        awa.Workflow("off-by-one")
        .step("a", add, args={"x": 1})
        .step("b", add, args={"x": 2}, after=["a"])
        .step("c", add, args={"x": 3}, after=["b"])
        .enqueue()
    )
    steps = step_ids(run.workflow_id)
    sql("UPDATE awa.workflow_steps SET remaining_deps = 2 WHERE job_id = %s", [steps["b"]])
    # "c" at zero while "b" has not run: released early, or never.
    sql("UPDATE awa.workflow_steps SET remaining_deps = 0 WHERE job_id = %s", [steps["c"]])
    assert broken() == {"workflow_steps": (steps["b"], steps["c"])}


def test_a_held_step_under_a_failed_dependency_is_reported():
    run = awa.Workflow("orphan").step("a", fail).step("b", add, args={"x": 1}, after=["a"])
    run = run.enqueue()
    steps = step_ids(run.workflow_id)
    # "a" failed but "b" was left held, where the failure should have cancelled it.
    sql(
        "UPDATE awa.workflow_steps SET state = 'failed', finished_at = now() WHERE job_id = %s",
        [steps["a"]],
    )
    sql(
        "UPDATE awa.workflows SET unfinished = 1, failures = 1 WHERE workflow_id = %s",
        [run.workflow_id],
    )
    assert broken() == {"workflow_steps": (steps["b"],)}


def test_a_running_workflow_miscounted_or_with_every_step_ended_is_reported():
    stuck = awa.chain(awa.call(add, x=1)).enqueue()
    run_jobs()
    miscounted = awa.chain(awa.call(add, x=1), awa.call(add, x=2)).enqueue()
    assert awa.get_workflow(stuck.workflow_id).state == "completed"
    sql("UPDATE awa.workflows SET unfinished = 5 WHERE workflow_id = %s", [miscounted.workflow_id])
    # Finished as far as its steps go, but left running: nothing would finish it.
    sql(
        "UPDATE awa.workflows SET state = 'running', finished_at = NULL WHERE workflow_id = %s",
        [stuck.workflow_id],
    )
    found = {f.name: f for f in audit.run().findings if not f.held}
    assert list(found) == ["workflow_state"]
    assert found["workflow_state"].unit == "workflow"
    assert found["workflow_state"].ids == tuple(sorted([miscounted.workflow_id, stuck.workflow_id]))
