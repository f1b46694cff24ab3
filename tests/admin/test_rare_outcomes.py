"""Failed and cancelled jobs under a long history of completed ones: their pages, counts and
bulk walks read the few unsuccessful closures by index, never every closure of the ring
(issue #36: at 200,000 jobs each count read all 140,000 closures), and migration 0021 that
adds the index reverses and applies again."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection, transaction
from django.urls import reverse

import awa_django as awa
from awa_django.storage.browse import JobFilter, count_in_state, list_jobs
from awa_django.storage.statement import run_read
from tests.admin.test_hot_lane import plan, rows_read
from tests.migrations.catalog import schema_catalog

COMPLETED = 6_000
FAILED = 4
CANCELLED = 3
NO_CURSOR = 2**63 - 1


def closed_history() -> dict[str, list[int]]:
    """COMPLETED + FAILED + CANCELLED jobs of one lane, claimed and closed through
    awa.claim_ready and awa.close_batch, the unsuccessful ones the oldest (under the whole
    history, as a rare state is). Answers the ids of each outcome."""
    total = COMPLETED + FAILED + CANCELLED
    ids = awa.enqueue_many("tests.noop", [{"n": n} for n in range(total)], queue="partners")
    outcomes = {
        "failed": ids[:FAILED],
        "cancelled": ids[FAILED : FAILED + CANCELLED],
        "completed": ids[FAILED + CANCELLED :],
    }
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM awa.claim_ready('partners', %s, 'rare-test', NULL, NULL, false)",
            [total],
        )
        assert cursor.fetchone()[0] == total
        for outcome, job_ids in outcomes.items():
            cursor.execute(
                """SELECT count(*) FROM awa.close_batch((
                       SELECT json_agg(json_build_object(
                           'ready_slot', c.ready_slot, 'queue', c.queue, 'priority', c.priority,
                           'shard', c.shard, 'lane_seq', c.lane_seq, 'job_id', c.job_id,
                           'run_lease', c.run_lease, 'outcome', %s::text))
                         FROM awa.claim_receipts c WHERE c.job_id = ANY(%s)))""",
                [outcome, job_ids],
            )
            assert cursor.fetchone()[0] == len(job_ids)
        cursor.execute("ANALYZE")
    return outcomes


@pytest.mark.parametrize("state", ["failed", "cancelled"])
def test_rare_closures_are_read_by_index(awa_db, state):
    history = closed_history()
    rare = FAILED if state == "failed" else CANCELLED
    for pair in ({"queue": None, "kind": None}, {"queue": "partners", "kind": "tests.noop"}):
        # The size a count asks for (COUNT_CAP + 1) and a page's.
        for size in (10_001, 51):
            params = {"before": NO_CURSOR, "size": size, "state": state, **pair}
            root = plan("closed_job_ids", params)
            assert root["Actual Rows"] == rare
            # Only the unsuccessful closures, of both outcomes; without the partial index every
            # closure of the ring (all COMPLETED of them).
            assert rows_read(root, "done_entries") <= FAILED + CANCELLED
    with connection.cursor() as cursor:
        assert run_read(cursor, count_in_state(state, JobFilter())) == rare
        assert run_read(cursor, count_in_state(state, JobFilter(kind="tests.noop"))) == rare
        page = run_read(
            cursor, list_jobs(where=JobFilter(state=state), before=None, limit=50, count=True)
        )
    assert sorted(job.job_id for job in page.jobs) == sorted(history[state])
    assert page.count == rare


def test_completed_closures_still_listed_and_counted(awa_db):
    history = closed_history()
    with connection.cursor() as cursor:
        page = run_read(
            cursor, list_jobs(where=JobFilter(state="completed"), before=None, limit=50, count=True)
        )
    assert [job.job_id for job in page.jobs] == sorted(history["completed"], reverse=True)[:50]
    assert page.count == COMPLETED


def test_retry_all_matching_failed_confirms_the_count(operator_client):
    history = closed_history()
    confirm = operator_client.post(
        reverse("admin:awa_django_job_act_matching"), {"action": "retry", "state": "failed"}
    )
    assert confirm.context["count"] == FAILED
    page = operator_client.get(reverse("admin:awa_django_job_changelist"), {"state": "cancelled"})
    assert sorted(job.job_id for job in page.context["jobs"]) == sorted(history["cancelled"])
    assert page.context["state_count"] == CANCELLED


@pytest.mark.usefixtures("awa_db")
def test_0021_reverses_and_applies_again():
    def catalog() -> list[str]:
        with connection.cursor() as cursor:
            return schema_catalog(cursor)

    def has_index() -> bool:
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass('awa.done_entries_unsuccessful') IS NOT NULL")
            return bool(cursor.fetchone()[0])

    installed = catalog()
    assert has_index()
    call_command("migrate", "awa_django", "0020_workflow_release", verbosity=0)
    assert not has_index()
    call_command("migrate", "awa_django", verbosity=0)
    assert has_index() and catalog() == installed


def ready_history(completed: int, available: int) -> None:
    """``completed`` jobs claimed and closed, then ``available`` newer ones waiting."""
    awa.enqueue_many("tests.noop", [{"n": n} for n in range(completed)], queue="partners")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM awa.claim_ready('partners', %s, 'big-test', NULL, NULL, false)",
            [completed],
        )
        cursor.execute(
            """SELECT count(*) FROM awa.close_batch((
                   SELECT json_agg(json_build_object(
                       'ready_slot', c.ready_slot, 'queue', c.queue, 'priority', c.priority,
                       'shard', c.shard, 'lane_seq', c.lane_seq, 'job_id', c.job_id,
                       'run_lease', c.run_lease, 'outcome', 'completed'))
                     FROM awa.claim_receipts c))"""
        )
    awa.enqueue_many("tests.noop", [{"n": n} for n in range(available)], queue="partners")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def test_a_capped_count_of_a_big_state_stops_at_the_cap(awa_db):
    """Counting completed or available jobs reads about COUNT_CAP + 1 of each table it walks,
    not the whole ring (issue #36: the planner hashed every closure and ready row to find
    10,001 of them)."""
    from awa_django.storage import browse

    cap = 2_000
    ready_history(completed=3 * cap, available=3 * cap)
    for state, table in (("completed", "done_entries"), ("available", "ready_entries")):
        plans: list[dict[str, Any]] = []

        def ids(query, params, plans=plans, real_ids=browse._ids):
            # The statement's executed plan, in the count's transaction and settings (a read's
            # next statement is built inside its transaction, after the answers before it).
            plans.append(plan(query, params))
            return real_ids(query, params)

        def available(queue, kind, size, plans=plans, real=browse._available):
            # The available count reads what waits after the lanes' cursors (one statement).
            plans.append(plan("count_available", {"queue": queue, "kind": kind, "size": size}))
            return real(queue, kind, size)

        with pytest.MonkeyPatch.context() as patch, transaction.atomic():
            patch.setattr(browse, "COUNT_CAP", cap)
            patch.setattr(browse, "_ids", ids)
            patch.setattr(browse, "_available", available)
            with connection.cursor() as cursor:
                assert run_read(cursor, count_in_state(state, JobFilter())) == cap + 1
                # The caller's transaction plans its later statements as before.
                cursor.execute("SELECT current_setting('enable_hashjoin')")
                assert cursor.fetchone()[0] == "on"
        (root,) = plans
        if state == "completed":
            assert root["Actual Rows"] == cap + 1
        # A few more than the cap (completed ready rows are walked past to the available
        # ones); planned with hash joins, every row of the ring (6,000 closures, 12,000 ready).
        assert rows_read(root, table) <= 2 * cap, state


def test_a_page_holding_every_job_of_its_state_counts_them_without_reading_again(awa_db):
    """ "What is running?" reads every claim of the ring to find the open ones; when the page's
    read found them all, the count is theirs, not a second read of every claim (issue #36)."""
    from django.test.utils import CaptureQueriesContext

    from tests.admin.test_hot_lane import hot_lane

    running = hot_lane(jobs=2_000, still_open=3)
    history = closed_history()
    open_attempts = browse_sql("open_attempt_job_ids")
    # A failed page reads failed_job_ids; its count would read closed_job_ids.
    failed_page = browse_sql("failed_job_ids")
    closed = browse_sql("closed_job_ids")
    for state, expected, statement in (
        ("running", running, open_attempts),
        ("failed", sorted(history["failed"], reverse=True), failed_page),
    ):
        with CaptureQueriesContext(connection) as queries, connection.cursor() as cursor:
            page = run_read(
                cursor, list_jobs(where=JobFilter(state=state), before=None, limit=50, count=True)
            )
        assert [job.job_id for job in page.jobs] == expected
        assert page.count == len(expected)
        reads = [q for q in queries.captured_queries if q["sql"].startswith(statement)]
        assert len(reads) == 1, state
        assert not [q for q in queries.captured_queries if q["sql"].startswith(closed)], state
    # A state with more jobs than a page still counts them with its own, capped read.
    with connection.cursor() as cursor:
        page = run_read(
            cursor, list_jobs(where=JobFilter(state="completed"), before=None, limit=50, count=True)
        )
    assert page.count == COMPLETED + 2_000 - 3


def browse_sql(name: str) -> str:
    """How a browse block's statement starts as captured (its text up to the first parameter,
    which the capture shows substituted)."""
    from awa_django.sql import queries

    text = queries("browse")[name]
    return text[: text.index("%(")]


def test_a_count_cut_short_by_the_statement_timeout_says_so(operator_client):
    """The count planned as a walk ends with its own error when PostgreSQL cancels it: the
    page answers 503 (the statement timeout's), not a 500 from putting the settings back in
    an aborted transaction."""
    from django.test.utils import override_settings

    closed_history()
    holder = psycopg_holder()
    try:
        holder.execute("LOCK TABLE awa.done_entries IN ACCESS EXCLUSIVE MODE")
        with override_settings(AWA={**settings.AWA, "ADMIN_STATEMENT_TIMEOUT_MS": 300}):
            confirm = operator_client.post(
                reverse("admin:awa_django_job_act_matching"),
                {"action": "retry", "state": "failed"},
            )
        assert confirm.status_code == 503
    finally:
        holder.rollback()
        holder.close()


def psycopg_holder():
    import psycopg

    from tests.conftest import subprocess_database_url

    return psycopg.connect(subprocess_database_url())
