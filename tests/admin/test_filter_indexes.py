"""The admin filters that read a big table whole before migration 0032_admin_filters (issue
#36): the DLQ's error-type, kind and reason filters read every entry (each error list
detoasted) and ``state=held`` every backlog row. Each now reads its matches from an index; the
plans are asserted by the rows they read, as the planner chooses once the tables are analyzed."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.urls import reverse

import awa_django as awa
from awa_django.sql import queries
from awa_django.storage.browse import JobFilter, count_in_state, list_jobs
from awa_django.storage.dlq import DlqFilter, count_matching, list_entries, matching_ids
from awa_django.storage.statement import Read, run, run_read
from tests.admin.test_hot_lane import explain, hot_lane, nodes
from tests.admin.test_hot_lane import rows_read as ring_rows_read

# Rows of the common kind of each table, against a few of the filtered one.
COMMON = 5_000
RARE = 3


def explain_each(read: Read[Any]) -> list[dict[str, Any]]:
    """The executed plans of the statements of ``read``, each run again for its answer, under
    the read's planner settings."""
    plans = []
    with transaction.atomic(), connection.cursor() as cursor:
        if read.plan is not None:
            run(cursor, read.plan)
        steps = read.steps()
        try:
            statement = next(steps)
            while True:
                plans.append(explain(statement.sql, statement.params))
                statement = steps.send(run(cursor, statement))
        except StopIteration:
            return plans


def rows_read(root: dict[str, Any], table: str) -> int:
    """Rows the plan's scans of ``table`` returned or filtered out, all loops."""
    return sum(
        (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
        for node in nodes(root)
        if node.get("Relation Name") == table
    )


def dead_letters(count: int, *, error_type: str, kind: str, reason: str) -> list[int]:
    error = json.dumps({"attempt": 1, "type": error_type, "message": "order 7 not found"})
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.dlq_entries (job_id, kind, queue, priority, args, attempt,"
            " original_run_lease, max_attempts, created_at, metadata, tags, errors, dlq_reason)"
            " SELECT nextval('awa.job_id_seq'), %s, 'default', 2, '{}', 1, 1, 1, now(), '{}',"
            " '{}', jsonb_build_array(%s::jsonb), %s"
            " FROM generate_series(1, %s) RETURNING job_id",
            [kind, error, reason, count],
        )
        return sorted(row[0] for row in cursor.fetchall())


@pytest.mark.parametrize(
    "where",
    [
        DlqFilter(error_type_prefix="LookupErr"),
        DlqFilter(error_type_prefix="builtins.lookup"),
        DlqFilter(error_type="builtins.LookupError"),
        DlqFilter(kind_prefix="charge"),
        DlqFilter(reason="moved_from_failed"),
    ],
    ids=lambda where: next(f"{k}={v}" for k, v in where.params().items() if v),
)
def test_a_dlq_filter_reads_only_its_entries(awa_db, where):
    dead_letters(
        COMMON, error_type="builtins.KeyError", kind="mail.send", reason="attempts_exhausted"
    )
    rare = dead_letters(
        RARE, error_type="builtins.LookupError", kind="shop.Charge", reason="moved_from_failed"
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    count = explain_each(count_matching(where))[-1]
    assert count["Actual Rows"] == 1
    page = explain_each(list_entries(where, limit=50))[-1]
    walk = explain_each(matching_ids(where, limit=50))[-1]
    for root in (count, page, walk):
        assert rows_read(root, "dlq_entries") <= 2 * RARE
    assert page["Actual Rows"] == walk["Actual Rows"] == RARE
    with connection.cursor() as cursor:
        assert run_read(cursor, count_matching(where)) == RARE
        assert sorted(run_read(cursor, matching_ids(where, limit=50))) == rare


def test_held_steps_are_read_from_their_own_index(awa_db):
    awa.enqueue_many("tests.noop", [{"n": n} for n in range(COMMON)], run_at=timedelta(days=1))
    for n in range(RARE):
        awa.Workflow(f"held-{n}").step("a", "tests.noop").step(
            "b", "tests.noop", after=["a"]
        ).enqueue()
    with connection.cursor() as cursor:
        cursor.execute("SELECT job_id FROM awa.deferred_jobs WHERE state = 'held'")
        held = [row[0] for row in cursor.fetchall()]
    assert len(held) == RARE
    params = {"before": 2**63 - 1, "size": 51, "state": "held", "queue": None, "kind": None}
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    root = explain(queries("browse")["deferred_job_ids"], params)
    assert root["Actual Rows"] == RARE
    assert rows_read(root, "deferred_jobs") <= RARE
    with connection.cursor() as cursor:
        page = run_read(
            cursor, list_jobs(where=JobFilter(state="held"), before=None, limit=50, count=True)
        )
        assert [job.job_id for job in page.jobs] == sorted(held, reverse=True)
        assert page.count == RARE
        assert run_read(cursor, count_in_state("held", JobFilter())) == RARE


WAITING = 200
CLAIMED = 5_000


def test_the_available_count_reads_only_what_waits(operator_client):
    """Jobs waiting in one queue under a newer hot lane of another, all claimed: the count
    behind the state page and *Cancel all matching…* reads the waiting rows, not the claimed
    ones above them (it walked every ready row newest first, probing each for its claim)."""
    waiting = awa.enqueue_many("tests.noop", [{"n": n} for n in range(WAITING)], queue="default")
    awa.cancel(waiting[0])
    hot_lane(CLAIMED, still_open=1)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    # A pair's ready rows are read by the index-only check of how many it has and, for a pair
    # with few, walked once; finding the pairs reads an index entry or so per pair.
    for where, bound in ((JobFilter(), WAITING), (JobFilter(queue="default"), 2 * WAITING + 10)):
        plans = explain_each(count_in_state("available", where))
        read = [ring_rows_read(root, "ready_entries") for root in plans]
        assert sum(read) <= bound, (where, read)
    for where in (JobFilter(), JobFilter(queue="default"), JobFilter(kind="tests.noop")):
        with connection.cursor() as cursor:
            assert run_read(cursor, count_in_state("available", where)) == WAITING - 1
    listed = operator_client.get(reverse("admin:awa_django_job_changelist"), {"state": "available"})
    assert listed.context["page"].count == WAITING - 1


def rows_fetched(tables: tuple[str, ...]) -> int:
    """Rows this transaction read so far from the partitions of ``tables``, by scans of either
    kind (a plpgsql function's statements, which EXPLAIN does not show, counted too)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(coalesce(s.seq_tup_read, 0) + coalesce(s.idx_tup_fetch, 0)), 0)"
            " FROM pg_stat_xact_user_tables s JOIN pg_inherits i ON i.inhrelid = s.relid"
            " WHERE i.inhparent = ANY(%s::regclass[])",
            [[f"awa.{t}" for t in tables]],
        )
        return int(cursor.fetchone()[0])


def test_queue_health_and_the_drain_read_only_what_waits(awa_db):
    """Jobs waiting in a queue behind a hot lane of it, all claimed: queue health's depths (the
    live refresh), the shard page's lane backlog, the drain confirmation's count and the drain
    itself read the waiting rows, not every claimed row of the ring probed for its claim
    (issue #36: the whole ring, at a million jobs)."""
    hot_lane(CLAIMED, still_open=1)
    waiting = awa.enqueue_many("tests.noop", [{"n": n} for n in range(WAITING)], queue="partners")
    awa.cancel(waiting[0])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    depths = explain(queries("queue")["queue_depths"], {})
    drain_count = explain(queries("control")["drain_candidates"], {"queue": "partners"})
    backlog = explain(queries("lanes")["lane_backlog"], {"queue": None})
    for root in (depths, drain_count, backlog):
        assert ring_rows_read(root, "ready_entries") <= WAITING
        assert ring_rows_read(root, "claim_receipts") <= 10
    with transaction.atomic():
        before = rows_fetched(("ready_entries", "claim_receipts"))
        assert awa.queues.drain("partners", confirm=True) == WAITING - 1
        # Each waiting row read once to find it and once by its cancel, and the claim cursor.
        assert rows_fetched(("ready_entries", "claim_receipts")) - before <= 3 * WAITING


# Claimed rows above the waiting ones: more than the available walk reads before it turns to
# what waits (browse.sql, available_job_ids).
WALKED_PAST = 25_000


def test_the_available_page_turns_to_what_waits_below_a_deep_hot_lane(operator_client):
    """Jobs waiting under a newer hot lane of another queue, all claimed: the available page
    (and each page of the bulk walk) reads a bounded walk of the newest ready rows, then what
    waits below it, not every claimed row of the lane newest first (issue #36)."""
    waiting = awa.enqueue_many("tests.noop", [{"n": n} for n in range(WAITING)], queue="default")
    awa.cancel(waiting[-1])
    hot_lane(WALKED_PAST, still_open=1)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    params = {"before": 2**63 - 1, "size": 51}
    root = explain(queries("browse")["available_job_ids"], params)
    assert ring_rows_read(root, "ready_entries") <= 20_000 + 2 * WAITING
    assert ring_rows_read(root, "claim_receipts") <= 10_000 + 10
    listed = operator_client.get(reverse("admin:awa_django_job_changelist"), {"state": "available"})
    assert listed.context["page"].count == WAITING - 1
    shown = [job.job_id for job in listed.context["page"].jobs]
    assert shown and shown == sorted(waiting[:-1], reverse=True)[: len(shown)]


# Claimed rows of one pair above its waiting ones: twice what its bounded walk reads.
PAIR_WALKED_PAST = 40_000


def _available_truth(queue: str, kind: str) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT job_id FROM awa.jobs WHERE state = 'available' AND queue = %s AND kind = %s"
            " ORDER BY job_id DESC",
            [queue, kind],
        )
        return [job_id for (job_id,) in cursor.fetchall()]


def test_a_filtered_available_walk_turns_to_what_waits_below_the_pairs_claimed_rows(
    operator_client,
):
    """Jobs of one queue and kind waiting in a low-priority lane under a newer hot lane of the
    same pair, all claimed: a page of the kind and queue filter (and each page of its bulk
    walk) reads a bounded walk of the pair's newest ready rows, then what waits below it, not
    every claimed row of the pair newest first (issue #36), and lists exactly what waits."""
    waiting = awa.enqueue_many(
        "tests.noop", [{"n": n} for n in range(WAITING)], queue="partners", priority=4
    )
    awa.cancel(waiting[-1])
    hot_lane(PAIR_WALKED_PAST, still_open=1)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    truth = _available_truth("partners", "tests.noop")
    assert truth == sorted(waiting[:-1], reverse=True)
    where = JobFilter(queue="partners", kind="tests.noop", state="available", exact=True)
    for before in (None, truth[100]):
        plans = explain_each(list_jobs(where=where, before=before, limit=50))
        # The check of the pair's size, the bounded walk, the walk to its last row, the waiting.
        bound = 2_000 + 2 * 10_000 + 3 * WAITING
        assert sum(ring_rows_read(root, "ready_entries") for root in plans) <= bound
        assert sum(ring_rows_read(root, "claim_receipts") for root in plans) <= 10_000 + 10
    walked: list[int] = []
    before = None
    with transaction.atomic(), connection.cursor() as cursor:
        while True:
            page = run_read(cursor, list_jobs(where=where, before=before, limit=50))
            walked.extend(job.job_id for job in page.jobs)
            if page.next_before is None:
                break
            before = page.next_before
        assert run_read(cursor, count_in_state("available", where)) == WAITING - 1
        # The walk planned its pair's reads with sorting as a last resort, then put it back.
        cursor.execute("SHOW enable_sort")
        assert cursor.fetchone()[0] == "on"
    assert walked == truth
    listed = operator_client.get(
        reverse("admin:awa_django_job_changelist"),
        {"state": "available", "queue": "partners", "kind": "tests.noop"},
    )
    assert listed.context["page"].count == WAITING - 1
    shown = [job.job_id for job in listed.context["page"].jobs]
    assert shown and shown == truth[: len(shown)]
