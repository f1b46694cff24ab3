"""One hot lane: tens of thousands of claims of one (queue, priority, shard), nearly all closed,
a few open. "What is running?", its count and the bulk walk must not compare every claim of
the lane with every ready row of it (issue #36, item 1)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.urls import reverse

import awa_django as awa
from awa_django.sql import queries
from awa_django.storage.browse import JobFilter, count_in_state, list_jobs, running_attempts
from awa_django.storage.execution import RescueCursor, mark_rescued
from awa_django.storage.statement import run, run_read

_SQL = queries("browse")

HOT = 30_000
OPEN = 3


def hot_lane(jobs: int = HOT, still_open: int = OPEN, *, outcome: str = "completed") -> list[int]:
    """``jobs`` jobs of one lane, all claimed by awa.claim_ready and all but the oldest
    ``still_open`` closed by awa.close_batch with ``outcome``, as a burst through one queue
    leaves the ring (the open ones are long jobs claimed first). Answers the open ones' ids,
    newest first."""
    ids = awa.enqueue_many("tests.noop", [{"n": n} for n in range(jobs)], queue="partners")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM awa.claim_ready('partners', %s, 'hot-worker', NULL, NULL, false)",
            [jobs],
        )
        assert cursor.fetchone()[0] == jobs
        cursor.execute("ANALYZE")
        cursor.execute(
            """SELECT count(*) FROM awa.close_batch((
                   SELECT json_agg(json_build_object(
                       'ready_slot', c.ready_slot, 'queue', c.queue, 'priority', c.priority,
                       'shard', c.shard, 'lane_seq', c.lane_seq, 'job_id', c.job_id,
                       'run_lease', c.run_lease, 'outcome', %s::text))
                     FROM awa.claim_receipts c WHERE c.job_id > %s))""",
            [outcome, ids[still_open - 1]],
        )
        assert cursor.fetchone()[0] == jobs - still_open
    return sorted(ids[:still_open], reverse=True)


def plan(name: str, params: dict[str, Any], **planner: str) -> dict[str, Any]:
    """The executed plan of a browse query, JIT off as the admin runs it, with ``planner``
    settings (enable_hashjoin="off", ...) for the rest of the test's transaction; its buffers
    count those of the functions it calls (awa.open_attempts), whose scans it does not show."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL jit = off")
        for setting, value in planner.items():
            cursor.execute("SELECT set_config(%s, %s, true)", [setting, value])
    return explain(_SQL[name], params)


def explain(sql: str, params: dict[str, Any]) -> dict[str, Any]:
    """The executed plan of ``sql``, as the session's settings plan it."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", params)
        (document,) = cursor.fetchone()
    result: dict[str, Any] = (json.loads(document) if isinstance(document, str) else document)[0]
    return result["Plan"]


def buffers(root: dict[str, Any]) -> int:
    return int(root.get("Shared Hit Blocks", 0) + root.get("Shared Read Blocks", 0))


def pages(*tables: str) -> int:
    """The pages of ``tables`` (every partition, with its indexes): one read of each."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT sum(pg_total_relation_size(i.inhrelid)) / current_setting('block_size')::int"
            " FROM pg_inherits i WHERE i.inhparent = ANY(%s::regclass[])",
            [[f"awa.{table}" for table in tables]],
        )
        (count,) = cursor.fetchone()
    return int(count)


def nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [node, *(child for sub in node.get("Plans", []) for child in nodes(sub))]


def rows_read(root: dict[str, Any], table: str) -> int:
    """Rows the plan's scans of ``table``'s partitions returned or filtered out, all loops."""
    return sum(
        (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
        for node in nodes(root)
        if node.get("Relation Name", "").startswith(f"{table}_")
    )


def probes(root: dict[str, Any], table: str) -> int:
    """How many times the plan started a scan of ``table`` (the most loops of a partition)."""
    return max(
        (
            node["Actual Loops"]
            for node in nodes(root)
            if node.get("Relation Name", "").startswith(f"{table}_")
        ),
        default=0,
    )


# The planner settings under which a hot lane's claims and ready rows are joined in each way
# PostgreSQL can: its own choice, and the merge and nested-loop plans it falls back to.
PLANNERS = [
    {},
    {"enable_hashjoin": "off"},
    {"enable_hashjoin": "off", "enable_sort": "off"},
    {"enable_hashjoin": "off", "enable_nestloop": "off"},
    {"enable_mergejoin": "off", "enable_hashjoin": "off"},
]


@pytest.mark.parametrize("planner", PLANNERS, ids=lambda p: ",".join(p) or "default")
def test_open_attempts_probe_only_the_open_claims(awa_db, planner):
    running = hot_lane()
    for waiting, pair in [
        (False, {"queue": None, "kind": None}),
        (True, {"queue": None, "kind": None}),
        (False, {"queue": "partners", "kind": "tests.noop"}),
    ]:
        params = {"before": 2**63 - 1, "size": 10_001, "waiting": waiting, **pair}
        root = plan("open_attempt_job_ids", params, **planner)
        assert root["Actual Rows"] == (0 if waiting else OPEN)
        # Every claim is read once to find the open ones (inside awa.open_attempts: at most a
        # read of the claims and closures); the ready rows and leases only for those (a lease
        # probe each, a ready row each when the kind is asked).
        assert rows_read(root, "claim_receipts") <= HOT
        assert buffers(root) <= pages("claim_receipts", "done_entries")
        assert rows_read(root, "ready_entries") <= OPEN
        assert probes(root, "leases") <= OPEN
    with connection.cursor() as cursor:
        assert [a.job_id for a in run(cursor, running_attempts(limit=10))] == running
    root = plan("running_attempts", {"limit": 10}, **planner)
    assert rows_read(root, "ready_entries") <= OPEN


def test_what_is_running_lists_and_counts_the_open_attempts(operator_client):
    running = hot_lane()
    with connection.cursor() as cursor:
        page = run_read(
            cursor, list_jobs(where=JobFilter(state="running"), before=None, limit=50, count=True)
        )
        assert [job.job_id for job in page.jobs] == running
        assert page.count == OPEN
        assert run_read(cursor, count_in_state("running", JobFilter(queue="partners"))) == OPEN
    listed = operator_client.get(reverse("admin:awa_django_job_changelist"), {"state": "running"})
    assert listed.status_code == 200
    for job_id in running:
        assert f">{job_id}<".encode() in listed.content


def test_cancel_all_matching_running_walks_the_open_attempts(operator_client):
    running = hot_lane()
    search = {"action": "cancel", "state": "running"}
    confirm = operator_client.post(reverse("admin:awa_django_job_act_matching"), search)
    assert confirm.context["count"] == OPEN
    done = operator_client.post(
        reverse("admin:awa_django_job_act_matching"),
        {**search, "counted": str(OPEN), "confirmed": "on"},
        follow=True,
    )
    assert [str(m) for m in done.context["messages"]] == [
        f"Cancelled {OPEN} jobs matching state=running."
    ]
    assert {awa.get_job(job_id).state for job_id in running} == {"cancelled"}


def test_after_a_rescue_pass_only_the_leases_and_newer_claims_are_read(awa_db):
    running = hot_lane()
    with connection.cursor() as cursor:
        # The open attempts' workers heartbeat: a lease each.
        cursor.execute(
            "INSERT INTO awa.leases (job_id, run_lease, lease_slot, ready_slot, queue, priority,"
            " shard, lane_seq, claimed_by)"
            " SELECT job_id, run_lease, 0, ready_slot, queue, priority, shard, lane_seq,"
            " claimed_by FROM awa.claim_receipts WHERE job_id = ANY(%s)",
            [running],
        )
        # As autovacuum leaves the receipts: the BRIN ranges on claimed_at summarized.
        cursor.execute("VACUUM ANALYZE awa.claim_receipts")
    params = {
        "before": 2**63 - 1,
        "size": 10_001,
        "waiting": False,
        "queue": None,
        "kind": None,
    }
    unmarked = buffers(plan("open_attempt_job_ids", params))
    with connection.cursor() as cursor:
        # A complete rescue pass since the lane was claimed: every lease-less receipt claimed
        # before its cursor is closed.
        cursor.execute("SELECT clock_timestamp()")
        (now,) = cursor.fetchone()
        run(cursor, mark_rescued(RescueCursor(now)))
        root = plan("open_attempt_job_ids", params)
        assert root["Actual Rows"] == OPEN
        marked = buffers(root)
        assert [a.job_id for a in run(cursor, running_attempts(limit=10))] == running
        assert run_read(cursor, count_in_state("running", JobFilter())) == OPEN
    # Without the mark every receipt and closure of the lane is read; with it, the leases' and
    # the index pages that say no receipt is newer.
    assert marked * 4 < unmarked


# Failed closures in an older ring slot, against a few completed ones in the current slot.
OLDER_FAILED = 12_000
NEWER_COMPLETED = 120


def test_the_completed_page_does_not_read_an_older_slot_of_other_outcomes(operator_client):
    """A ring slot holding only failed closures under a newer slot with completed ones: the
    completed page reads the newest closures across the slots, not every closure of the older
    slot to find its first completed one (issue #36: all 50,100 closures of slot 0 at the
    production shape)."""
    hot_lane(OLDER_FAILED, still_open=1, outcome="failed")
    with connection.cursor() as cursor:
        cursor.execute("SELECT awa.rotate_queue_ring(1000)")
        assert cursor.fetchone()[0] == "rotated"
    newer = hot_lane(NEWER_COMPLETED, still_open=1)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
        cursor.execute("SELECT job_id FROM awa.jobs WHERE state = 'completed' ORDER BY job_id DESC")
        truth = [job_id for (job_id,) in cursor.fetchall()]
    assert len(truth) == NEWER_COMPLETED - 1 and newer[0] not in truth
    params = {"before": 2**63 - 1, "size": 51, "state": "completed", "queue": None, "kind": None}
    root = plan("closed_job_ids", params)
    assert root["Actual Rows"] == 51
    assert rows_read(root, "done_entries") <= 2 * 51 + 10
    listed = operator_client.get(reverse("admin:awa_django_job_changelist"), {"state": "completed"})
    assert [job.job_id for job in listed.context["page"].jobs] == truth[:50]
    assert listed.context["page"].count == len(truth)
    # Newer failures than the newest 10,000 closures hold: the page goes on down the completed
    # ones below them, and lists the same jobs.
    hot_lane(10_100, still_open=1, outcome="failed")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    listed = operator_client.get(reverse("admin:awa_django_job_changelist"), {"state": "completed"})
    assert [job.job_id for job in listed.context["page"].jobs] == truth[:50]
    assert listed.context["page"].count == len(truth)
