"""Kind and queue filters read the (queue, kind, job_id) indexes (migration 0008): a rare kind
or queue under 20,000 newer jobs of a common one is on page 1 of every state it is in, its
counts are right, and the listing reads the rare jobs' index entries only, never the others."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

import awa_django as awa
from awa_django.sql import queries
from awa_django.storage.browse import JobFilter, count_in_state, list_jobs
from awa_django.storage.statement import run_read
from tests.conftest import run_burst

COMMON = 20_000
COMPLETED = 2_000
_SQL = queries("browse")


def enqueue_common(jobs: int = COMMON) -> None:
    awa.enqueue_many("tests.noop", [{"n": n} for n in range(jobs)])


def page(where: JobFilter, before: int | None = None, limit: int = 50) -> list[int]:
    with connection.cursor() as cursor:
        return [
            job.job_id
            for job in run_read(cursor, list_jobs(where=where, before=before, limit=limit)).jobs
        ]


def count(state: str, where: JobFilter) -> int:
    with connection.cursor() as cursor:
        return run_read(cursor, count_in_state(state, where))


def rare_kind_history() -> dict[str, list[int]]:
    """tests.always_fails jobs in every state a worker-less test can hold, oldest, then
    COMMON newer tests.noop jobs: COMPLETED of them completed (so the claims and closures the
    closed states join are many too), the rest available. The statistics are fresh, as
    autovacuum keeps them, so the plans are those of a live database of this size."""
    failed = [awa.enqueue("tests.always_fails", args={}, max_attempts=1) for _ in range(2)]
    dead = awa.enqueue("tests.always_fails", args={}, max_attempts=1)
    retryable = awa.enqueue("tests.always_fails", args={}, max_attempts=3)
    awa.enqueue_many("tests.noop", [{"n": n} for n in range(COMPLETED)])
    run_burst(queues={"default": 8})
    assert awa.dlq.move_failed(job_ids=[dead]) == 1
    scheduled = awa.enqueue("tests.always_fails", args={}, run_at=timedelta(hours=1))
    cancelled = awa.enqueue("tests.always_fails", args={}, queue="email")
    awa.cancel(cancelled)
    available = awa.enqueue("tests.always_fails", args={}, queue="email")
    enqueue_common(COMMON - COMPLETED)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return {
        "failed": sorted(failed, reverse=True),
        "dlq": [dead],
        "retryable": [retryable],
        "scheduled": [scheduled],
        "cancelled": [cancelled],
        "available": [available],
    }


def plan(name: str, params: dict[str, Any]) -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {_SQL[name]}", params)
        (document,) = cursor.fetchone()
    result: dict[str, Any] = (json.loads(document) if isinstance(document, str) else document)[0]
    return result["Plan"]


def nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [node, *(child for sub in node.get("Plans", []) for child in nodes(sub))]


def rows_read(root: dict[str, Any]) -> int:
    """Rows every table or index scan of the plan returned or threw away, over all its loops."""
    return sum(
        (node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0))
        * node.get("Actual Loops", 1)
        for node in nodes(root)
        if "Relation Name" in node
    )


def buffers(root: dict[str, Any]) -> int:
    return int(root["Shared Hit Blocks"] + root["Shared Read Blocks"])


def indexes_read(root: dict[str, Any]) -> set[str]:
    return {node["Index Name"] for node in nodes(root) if "Index Name" in node}


def opening(name: str) -> str:
    """The text of a block up to its first parameter, to tell which block a listing ran."""
    return _SQL[name].split("%(")[0]


def name_pairs(where: JobFilter) -> list[dict[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute(_SQL["name_pairs"], where.params())
        return [{"queue": queue, "kind": kind} for queue, kind in cursor.fetchall()]


@pytest.mark.usefixtures("awa_db")
def test_a_rare_kind_under_20000_newer_jobs_is_on_page_one_of_each_of_its_states():
    expected = rare_kind_history()
    every = sorted((i for ids in expected.values() for i in ids), reverse=True)
    for prefix in ("tests.always", "TESTS.ALWAYS_F", "Tests.Always_fails"):
        assert page(JobFilter(kind=prefix)) == every, prefix
        for state, job_ids in expected.items():
            assert page(JobFilter(kind=prefix, state=state)) == job_ids, (prefix, state)
            assert count(state, JobFilter(kind=prefix, state=state)) == len(job_ids), state
    # States the rare kind is not in, and names that match nothing, list and count nothing.
    for state in ("completed", "running", "waiting_external"):
        assert page(JobFilter(kind="tests.always", state=state)) == []
        assert count(state, JobFilter(kind="tests.always")) == 0
    assert page(JobFilter(kind="tests.alwaysX")) == []
    assert page(JobFilter(kind="tests.always", queue="nope", state="failed")) == []
    # Kind and queue together: the rare kind's jobs of one queue.
    email = JobFilter(kind="tests.al", queue="EM")
    assert page(email) == sorted(expected["available"] + expected["cancelled"], reverse=True)
    # The common kind is counted up to the cap, as without a filter.
    assert count("available", JobFilter(kind="tests.noop")) == 10_001


@pytest.mark.usefixtures("awa_db")
def test_a_rare_kind_listing_reads_its_own_index_entries_only():
    expected = rare_kind_history()
    where = JobFilter(kind="tests.ALWAYS")
    pairs = name_pairs(where)
    assert pairs == [
        {"queue": "default", "kind": "tests.always_fails"},
        {"queue": "email", "kind": "tests.always_fails"},
    ]
    pair_plan = plan("name_pairs", where.params())
    # One probe per distinct pair per table, not a read of the 20,000 rows.
    assert rows_read(pair_plan) < 50
    assert buffers(pair_plan) < 200
    listings = {
        "job_id_window_by_name": {},
        "available_job_ids_by_name": {},
        "open_attempt_job_ids_by_name": {"waiting": False},
        "deferred_job_ids_by_name": {"state": "scheduled"},
        "dlq_job_ids_by_name": {},
        "closed_job_ids_by_name": {"state": "failed"},
    }
    for name, params in listings.items():
        for pair in pairs:
            listing = plan(name, {"before": 2**63 - 1, "size": 51, **pair, **params})
            if "ready_entries" in json.dumps(listing):
                # The ring is the big table here; the backlog and DLQ tables are a few rows,
                # read whole whatever their indexes.
                assert any(
                    index.endswith("queue_kind_job_id_idx") for index in indexes_read(listing)
                ), (name, pair)
            # The ids of the rare kind and the probes of their state: a few dozen rows, where
            # a walk of the job ids would read the 20,000 newer ones first.
            assert rows_read(listing) < 100, (name, pair)
            assert buffers(listing) < 300, (name, pair)
    # The count reads as little: a COUNT_CAP-sized walk stops at the rare kind's last job.
    for pair in pairs:
        count_plan = plan(
            "closed_job_ids_by_name",
            {"before": 2**63 - 1, "size": 10_001, **pair, "state": "failed"},
        )
        assert rows_read(count_plan) < 100
    assert len(expected["failed"]) == 2


@pytest.mark.usefixtures("awa_db")
def test_a_rare_queue_under_20000_newer_jobs_is_on_page_one_of_each_of_its_states():
    completed = [awa.enqueue("tests.noop", args={}, queue="partners") for _ in range(2)]
    failed = awa.enqueue("tests.always_fails", args={}, queue="partners", max_attempts=1)
    run_burst(queues={"partners": 2})
    scheduled = awa.enqueue("tests.noop", args={}, queue="partners", run_at=timedelta(hours=1))
    available = awa.enqueue("tests.record", args={}, queue="partners")
    enqueue_common()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    expected = {
        "completed": sorted(completed, reverse=True),
        "failed": [failed],
        "scheduled": [scheduled],
        "available": [available],
    }
    for prefix in ("par", "PARTNERS"):
        assert page(JobFilter(queue=prefix)) == sorted(
            [*completed, failed, scheduled, available], reverse=True
        )
        for state, job_ids in expected.items():
            assert page(JobFilter(queue=prefix, state=state)) == job_ids, state
            assert count(state, JobFilter(queue=prefix)) == len(job_ids), state
    # The rare queue's tests.noop jobs, not the 20,000 of the default queue.
    assert page(JobFilter(queue="partners", kind="tests.noop")) == sorted(
        [*completed, scheduled], reverse=True
    )
    for pair in name_pairs(JobFilter(queue="Part")):
        listing = plan(
            "closed_job_ids_by_name",
            {"before": 2**63 - 1, "size": 51, **pair, "state": "completed"},
        )
        assert any(index.endswith("queue_kind_job_id_idx") for index in indexes_read(listing))
        assert rows_read(listing) < 100


@pytest.mark.usefixtures("awa_db")
def test_keyset_pages_under_a_name_filter_interleave_pairs_without_gap_or_overlap():
    # Two kinds and two queues matching the filters (four pairs), their ids interleaved, so every
    # page merges the walks of several pairs.
    ids = []
    for n in range(12):
        kind = ("tests.record", "tests.record_async")[n % 2]
        queue = ("email", "partners")[(n // 2) % 2]
        ids.append(awa.enqueue(kind, args={"n": n}, queue=queue))
    awa.enqueue_many("tests.noop", [{"n": n} for n in range(30)], queue="email")
    newest_first = sorted(ids, reverse=True)
    in_email = [job_id for n, job_id in enumerate(ids) if (n // 2) % 2 == 0][::-1]
    for where, expected in (
        (JobFilter(kind="TESTS.REC"), newest_first),
        (JobFilter(kind="tests.record", queue="Email"), in_email),
    ):
        seen: list[int] = []
        before = None
        while True:
            with connection.cursor() as cursor:
                result = run_read(cursor, list_jobs(where=where, before=before, limit=5))
            seen.extend(job.job_id for job in result.jobs)
            if result.next_before is None:
                break
            before = result.next_before
        assert seen == expected
        stated = JobFilter(kind=where.kind, queue=where.queue, state="available")
        assert page(stated, before=expected[1], limit=3) == expected[2:5]
        assert count("available", stated) == len(expected)


@pytest.mark.usefixtures("awa_db")
def test_a_rare_state_of_a_common_kind_walks_the_states_rows_not_the_kinds():
    # 20,000 tests.noop jobs, 2,000 of them completed, and one of them cancelled and one failed
    # under them all: the kind's ready rows are many, so its claims and closures are walked.
    cancelled = awa.enqueue("tests.noop", args={})
    awa.cancel(cancelled)
    rare_kind_history()
    where = JobFilter(kind="tests.noop")
    assert page(JobFilter(kind="tests.noop", state="cancelled")) == [cancelled]
    assert count("cancelled", where) == 1
    assert page(JobFilter(kind="tests.noop", state="running")) == []
    assert count("failed", where) == 0
    assert count("completed", where) == COMPLETED
    # The listing chose the state's walk for this pair.
    with CaptureQueriesContext(connection) as captured:
        assert count("cancelled", where) == 1
    ran = "\n".join(query["sql"] for query in captured.captured_queries)
    assert opening("closed_job_ids") in ran
    assert opening("closed_job_ids_by_name") not in ran
    (pair,) = name_pairs(where)
    # Given the pair, the state's rows: the 2,000 claims (or closures) and their probes, not the
    # 20,000 ready rows of the kind (which its _by_name walk would read).
    for name, params in (
        ("open_attempt_job_ids", {"waiting": False}),
        ("closed_job_ids", {"state": "cancelled"}),
        ("closed_job_ids", {"state": "failed"}),
    ):
        listing = plan(name, {"before": 2**63 - 1, "size": 10_001, **pair, **params})
        assert rows_read(listing) < 4 * COMPLETED + 100, (name, params)
        walked = plan(f"{name}_by_name", {"before": 2**63 - 1, "size": 10_001, **pair, **params})
        assert rows_read(walked) > COMMON, (name, params)


def jit_setting() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        (value,) = cursor.fetchone()
    return str(value)


@pytest.mark.usefixtures("awa_db")
def test_listings_are_planned_without_jit_and_leave_the_session_setting_alone():
    # A listing's plans span every ring partition with a probe per row: estimated far above
    # jit_above_cost, compiled for longer than they run. In autocommit the next statement has
    # the server's setting again; inside the caller's transaction the listing puts it back
    # (tests/test_list_jobs.py checks the listing's own statements run without JIT).
    awa.enqueue("tests.noop", args={})
    server_setting = jit_setting()
    page(JobFilter(kind="tests.noop", state="running"))
    assert count("running", JobFilter(kind="tests.noop")) == 0
    assert jit_setting() == server_setting
    with transaction.atomic():
        page(JobFilter(state="available"))
        assert jit_setting() == server_setting
    assert jit_setting() == server_setting
