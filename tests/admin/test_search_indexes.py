"""The jobs page's content search answered from the search indexes of migration 0024 (issue
#36): a match behind more than a page's scan of newer jobs is on page 1, and the statement
reads the indexes, not every row, once the tables are large enough for the planner to care."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

from django.db import connection, transaction
from django.urls import reverse

import awa_django as awa
from awa_django.sql import queries
from awa_django.storage import browse
from tests.admin.test_filter_indexes import dead_letters, rows_read
from tests.admin.test_hot_lane import explain as explain_analyzed
from tests.admin.test_jobs import listed_ids
from tests.conftest import run_burst

LIST = "admin:awa_django_job_changelist"
_SQL = queries("browse")
# More newer jobs than a page of the old bounded scan read (SEARCH_SCAN, 10,000).
NEWER = 10_500


def newer_jobs(count: int = NEWER) -> None:
    """``count`` plain jobs, each with arguments of its own and no tag or error."""
    awa.enqueue_many("tests.noop", [{"n": n} for n in range(count)], queue="default")


def test_old_matches_are_on_page_one(operator_client):
    assert browse.SEARCH_SCAN < NEWER
    failed = awa.enqueue(
        "tests.always_fails", args={"message": "card 4242 declined"}, max_attempts=1
    )
    run_burst()
    tagged = awa.enqueue("tests.typed", args={"user_id": 99, "email": "n@x"}, tags=["needle"])
    newer_jobs()
    url = reverse(LIST)
    for search, expected in (
        ({"args": '{"user_id": 99}'}, [tagged]),
        ({"tag": "needle"}, [tagged]),
        ({"error": "CARD 4242"}, [failed]),
        ({"error": "card 4242", "state": "failed"}, [failed]),
        ({"args": '{"message": "card 4242 declined"}', "error": "declined"}, [failed]),
    ):
        response = operator_client.get(url, search)
        assert listed_ids(response) == expected, search
        page = response.context["page"]
        assert not page.scan_stopped and page.next_before is None, search
        assert b"search older jobs" not in response.content
    # Only the jobs that match are checked, not the newer ones.
    assert operator_client.get(url, {"tag": "needle"}).context["page"].scanned == 1
    assert listed_ids(operator_client.get(url, {"args": '{"user_id": 98}'})) == []


def test_a_match_within_a_queue_filter(operator_client):
    wanted = awa.enqueue("tests.typed", args={"user_id": 7, "email": "a@x"})
    newer_jobs(50)
    awa.enqueue("tests.typed", args={"user_id": 7, "email": "b@x"}, queue="email")
    url = reverse(LIST)
    response = operator_client.get(url, {"args": '{"user_id": 7}', "queue": "def"})
    assert listed_ids(response) == [wanted]


def nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [node, *(child for sub in node.get("Plans", []) for child in nodes(sub))]


def explain(params: dict[str, Any]) -> list[dict[str, Any]]:
    """The plan nodes of the search statement, planned as the admin plans it (JIT off)."""
    every = {"args": None, "tag": None, "error": None, "state": None, "queue": None, "kind": None}
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL jit = off")
        cursor.execute(
            f"EXPLAIN (FORMAT JSON) {_SQL['search_job_ids']}",
            {**every, "before": 2**63 - 1, "size": browse.SEARCH_BATCH, **params},
        )
        (document,) = cursor.fetchone()
    plan = json.loads(document) if isinstance(document, str) else document
    return nodes(plan[0]["Plan"])


def test_the_search_statement_reads_the_indexes(awa_db):
    awa.enqueue("tests.always_fails", args={"message": "card 4242"}, max_attempts=1)
    run_burst()
    awa.enqueue("tests.typed", args={"user_id": 99, "email": "n@x"}, tags=["needle"])
    newer_jobs(20_000)
    with connection.cursor() as cursor:
        for table in ("ready_entries", "done_entries", "deferred_jobs", "dlq_entries"):
            cursor.execute(f"ANALYZE awa.{table}")
        # The partition holding the 20,000 jobs (the others are empty: any plan reads nothing).
        cursor.execute(
            "SELECT tableoid::regclass::text FROM awa.ready_entries"
            " GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"
        )
        (big,) = cursor.fetchone()
    big = big.removeprefix("awa.")
    for params, index in (
        ({"args": '{"user_id": 99}'}, f"{big}_args_idx"),
        ({"tag": "needle"}, f"{big}_tags_idx"),
        ({"error": "%card 4242%"}, f"{big}_error_text_idx"),
        ({"args": '{"user_id": 99}', "tag": "needle"}, f"{big}_"),
    ):
        plan = explain(params)
        scans = [node for node in plan if node.get("Relation Name") == big]
        assert scans and all(node["Node Type"] == "Bitmap Heap Scan" for node in scans), params
        used = [node["Index Name"] for node in plan if node["Node Type"] == "Bitmap Index Scan"]
        assert any(name.startswith(index) for name in used), (params, used)


def test_an_enqueue_leaves_the_pending_list_to_vacuum(awa_db):
    # An enqueue appends each job's argument keys to the ring's index's pending list; past the
    # list's limit the enqueuing statement itself would merge the whole list into the index.
    # The limit of the indexes an enqueue writes is their own (migration 0028), not the
    # server's: under a server set to the smallest limit there is, nothing is merged.
    jobs = 8_000
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
        cursor.execute("SET LOCAL gin_pending_list_limit = 64")
        newer_jobs(jobs)
        cursor.execute(
            "SELECT sum((pgstatginindex(i.inhrelid)).pending_tuples),"
            "       sum((pgstatginindex(i.inhrelid)).pending_pages) FROM pg_inherits i"
            " WHERE i.inhparent = 'awa.ready_entries_args'::regclass"
        )
        pending, pages = cursor.fetchone()
        # Past the 64 kB the server allows, and every job's entries still pending.
        assert pending == jobs and pages * 8192 > 64 * 1024
        transaction.set_rollback(True)


def datalist(content: str, name: str) -> list[str]:
    start = content.index(f'<datalist id="{name}">')
    body = content[start : content.index("</datalist>", start)]
    return re.findall(r'<option value="([^"]*)">', body)


def test_the_forms_offer_the_kinds_queues_and_error_types_that_exist(operator_client):
    awa.enqueue("tests.always_fails", args={"message": "no"}, max_attempts=1)
    run_burst()
    awa.enqueue("tests.typed", args={"user_id": 1, "email": "a@x"}, queue="email")
    jobs = operator_client.get(reverse(LIST)).content.decode()
    assert datalist(jobs, "awa-kinds") == ["tests.always_fails", "tests.typed"]
    assert {"default", "email"} <= set(datalist(jobs, "awa-queues"))
    (error_type,) = datalist(jobs, "awa-error-types")
    assert error_type.endswith("RuntimeError")
    assert 'list="awa-kinds"' in jobs and 'list="awa-error-types"' in jobs
    dlq = operator_client.get(reverse("admin:awa_django_deadletter_changelist")).content.decode()
    assert datalist(dlq, "awa-error-types") == [error_type]
    assert "LookupError finds builtins.LookupError" in dlq


def test_a_state_held_outside_the_ring_reads_only_its_table(operator_client, monkeypatch):
    # A dead letter's record is its DLQ row and a scheduled job's its backlog row: the ring's
    # many matching rows are not candidates, so the page needs no "search older".
    monkeypatch.setattr(browse, "SEARCH_BATCH", 5)
    monkeypatch.setattr(browse, "SEARCH_SCAN", 10)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.dlq_entries (job_id, kind, queue, priority, args, attempt,"
            " original_run_lease, max_attempts, created_at, metadata, tags, errors, dlq_reason)"
            " VALUES (nextval('awa.job_id_seq'), 'tests.typed', 'default', 2,"
            " '{\"user_id\": 5}', 1, 1, 1, now(), '{}', '{}', '[]', 'terminal_error')"
            " RETURNING job_id"
        )
        (dead,) = cursor.fetchone()
    later = awa.enqueue(
        "tests.typed", args={"user_id": 5, "email": "s@x"}, run_at=timedelta(hours=1)
    )
    for _ in range(25):
        awa.enqueue("tests.typed", args={"user_id": 5, "email": "a@x"})
    url = reverse(LIST)
    for state, expected in (("dlq", [dead]), ("scheduled", [later])):
        response = operator_client.get(url, {"args": '{"user_id": 5}', "state": state})
        assert listed_ids(response) == expected, state
        assert not response.context["page"].scan_stopped, state


# Dead letters all holding one error text, more than a search statement asks for at once.
COMMON_TEXT = 20_000


def test_a_common_error_text_walks_the_newest_dead_letters(operator_client):
    """The trigram indexes are partial, and PostgreSQL reads no statistics from a partial
    index: the planner guessed that any text matched a handful of entries, and for a text every
    dead letter holds read each one through the index (its text computed again for the
    recheck) to keep the newest. Given the statistics of migration 0033 it walks the newest
    entries, and still reads a rare text through the index."""
    common = dead_letters(
        COMMON_TEXT, error_type="builtins.KeyError", kind="mail.send", reason="attempts_exhausted"
    )
    rare_ids = dead_letters(3, error_type="builtins.LookupError", kind="mail.send", reason="pruned")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE awa.dlq_entries")
    every = {"args": None, "tag": None, "state": "dlq", "queue": None, "kind": None}
    bounds = {"before": 2**63 - 1, "size": browse.SEARCH_BATCH}
    walked = explain_analyzed(_SQL["search_job_ids"], {**every, **bounds, "error": "%order 7%"})
    assert walked["Actual Rows"] == browse.SEARCH_BATCH
    assert rows_read(walked, "dlq_entries") <= browse.SEARCH_BATCH + 3
    rare = explain_analyzed(_SQL["search_job_ids"], {**every, **bounds, "error": "%lookuperr%"})
    assert rare["Actual Rows"] == 3
    assert "dlq_entries_error_text" in {node.get("Index Name") for node in nodes(rare)}
    response = operator_client.get(reverse(LIST), {"error": "order 7", "state": "dlq"})
    assert listed_ids(response) == sorted(common + rare_ids, reverse=True)[:50]


def test_a_page_checks_its_candidates_a_slice_at_a_time(operator_client):
    """Reading the records of a whole batch of candidates at once, the planner read every ring
    partition whole; a page now checks them a slice at a time and stops once it is full."""
    ids = awa.enqueue_many("tests.typed", [{"user_id": 7, "email": f"{n}@x"} for n in range(500)])
    response = operator_client.get(reverse(LIST), {"args": '{"user_id": 7}'})
    assert listed_ids(response) == sorted(ids, reverse=True)[:50]
    page = response.context["page"]
    assert page.scanned < len(ids) and not page.scan_stopped
    assert page.scanned == browse.SEARCH_CHECK
    older = operator_client.get(reverse(LIST), {"args": '{"user_id": 7}', "before": ids[0] + 1})
    assert listed_ids(older) == [ids[0]]
