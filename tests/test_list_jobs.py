"""``awa.list_jobs``: the public listing reads its ids as the admin's Jobs list does (down the
job id and name indexes, not through the ``awa.jobs`` view), and answers what the view holds:
the same jobs, newest first, for every state, queue and kind, page after page."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

import awa_django as awa
from awa_django.storage.browse import JOB_STATES
from tests.conftest import run_burst
from tests.jit_settings import jit_before, show_jit

pytestmark = pytest.mark.usefixtures("awa_db")

KINDS = (None, "tests.noop", "tests.always_fails")
QUEUES = (None, "default", "email")


def mixed_history() -> None:
    """Jobs of two kinds on two queues in every state a worker-less test can leave them in."""
    awa.enqueue_many("tests.noop", [{"n": n} for n in range(5)])
    for _ in range(2):
        awa.enqueue("tests.always_fails", args={}, max_attempts=1)
    dead = awa.enqueue("tests.always_fails", args={}, max_attempts=1)
    awa.enqueue("tests.always_fails", args={}, max_attempts=3)
    run_burst(queues={"default": 4})
    assert awa.dlq.move_failed(job_ids=[dead]) == 1
    awa.enqueue("tests.noop", args={}, run_at=timedelta(hours=1))
    awa.cancel(awa.enqueue("tests.always_fails", args={}, queue="email"))
    awa.enqueue_many("tests.noop", [{"n": n} for n in range(3)], queue="email")
    awa.enqueue("tests.always_fails", args={})


def from_view(*, queue: str | None, kind: str | None, state: str | None) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT job_id FROM awa.jobs WHERE (%(q)s::text IS NULL OR queue = %(q)s) "
            "AND (%(k)s::text IS NULL OR kind = %(k)s) AND (%(s)s::text IS NULL OR state = %(s)s) "
            "ORDER BY job_id DESC",
            {"q": queue, "k": kind, "s": state},
        )
        return [row[0] for row in cursor.fetchall()]


def every_page(limit: int, **where: str | None) -> list[int]:
    ids: list[int] = []
    before = None
    while True:
        page = awa.list_jobs(limit=limit, before_id=before, **where)
        ids += [job.job_id for job in page]
        if len(page) < limit:
            return ids
        before = page[-1].job_id


def test_every_filter_lists_what_the_view_holds_newest_first_page_after_page():
    mixed_history()
    states_seen = {job.state for job in awa.list_jobs(limit=100)}
    assert {"completed", "failed", "retryable", "dlq", "scheduled", "cancelled"} <= states_seen
    assert "available" in states_seen
    for state, queue, kind in itertools.product((None, *JOB_STATES), QUEUES, KINDS):
        expected = from_view(queue=queue, kind=kind, state=state)
        where = {"queue": queue, "kind": kind, "state": state}
        listed = awa.list_jobs(limit=100, **where)
        assert [job.job_id for job in listed] == expected, where
        assert all(job.state == state for job in listed if state is not None)
        assert every_page(2, **where) == expected, where


def test_names_match_whole_and_case_included():
    awa.enqueue("tests.noop", args={}, queue="email")
    assert len(awa.list_jobs(kind="tests.noop")) == 1
    assert len(awa.list_jobs(queue="email", kind="tests.noop")) == 1
    # The admin's search matches these; the public listing does not.
    for kind in ("tests.noo", "TESTS.NOOP", "tests_noop", "tests.%"):
        assert awa.list_jobs(kind=kind) == [], kind
    for queue in ("emai", "Email", "e%"):
        assert awa.list_jobs(queue=queue) == [], queue


def test_bad_arguments_are_refused_and_a_limit_of_zero_lists_nothing():
    awa.enqueue("tests.noop", args={})
    with pytest.raises(ValueError, match="state must be one of"):
        awa.list_jobs(state="done")
    for limit in (-1, True, 2.5):
        with pytest.raises(ValueError, match="limit must be an integer 0 or more"):
            awa.list_jobs(limit=limit)
    with pytest.raises(ValueError, match="before_id must be a job id"):
        awa.list_jobs(before_id="10")
    assert awa.list_jobs(limit=0) == []
    assert len(awa.list_jobs(limit=1)) == 1


def test_the_listing_finds_its_ids_without_reading_the_jobs_view():
    mixed_history()
    for where in ({}, {"state": "failed"}, {"kind": "tests.noop", "state": "available"}):
        with CaptureQueriesContext(connection) as queries:
            assert awa.list_jobs(**where)
        view_reads = [q["sql"] for q in queries if "FROM awa.jobs" in q["sql"]]
        # The page's records are read by id; the ids come from the tables' indexes.
        assert len(view_reads) == 1 and "job_id = ANY" in view_reads[0], where


def test_inside_the_callers_transaction_the_listing_puts_its_jit_setting_back():
    awa.enqueue("tests.noop", args={})
    server_setting = show_jit()
    with transaction.atomic():
        # Before each statement that reads the ring: the setting it is planned with.
        with jit_before("awa.ready_entries") as seen:
            assert len(awa.list_jobs(state="available")) == 1
        assert show_jit() == server_setting
    assert seen and set(seen) == {"off"}
