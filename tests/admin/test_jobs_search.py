"""The jobs page's content search (arguments by JSON containment, tag, error text), its bounded
scan, and newer/older paging."""

from __future__ import annotations

import pytest
from django.db import connection
from django.urls import reverse

import awa_django as awa
from awa_django.admin import jobs as jobs_admin
from awa_django.storage import browse
from tests.admin.test_jobs import listed_ids
from tests.conftest import run_burst

LIST = "admin:awa_django_job_changelist"


def test_search_by_argument_containment(operator_client):
    seven = awa.enqueue("tests.typed", args={"user_id": 7, "email": "a@x", "tags": ["pro", "eu"]})
    awa.enqueue("tests.typed", args={"user_id": 8, "email": "b@x", "tags": ["eu"]})
    url = reverse(LIST)
    assert listed_ids(operator_client.get(url, {"args": '{"user_id": 7}'})) == [seven]
    nested = operator_client.get(url, {"args": '{"tags": ["pro"]}'})
    assert listed_ids(nested) == [seven]
    assert listed_ids(operator_client.get(url, {"args": '{"user_id": 9}'})) == []
    scanned = operator_client.get(url, {"args": '{"user_id": 7}'})
    assert b"searched through their\nindexes over every retained job" in scanned.content


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{user_id: 7}", "not JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"x": NaN}', "not JSON"),
        ('{"x": "\\u0000"}', "args.x"),
        ('{"x": "\\ud800"}', "args.x"),
        ("[" * 1500 + "]" * 1500, "Ensure this value has at most 2000 characters"),
        ("{" + '"a":{' * 600 + "}" * 601, ""),
    ],
)
def test_bad_argument_json_is_a_form_error(operator_client, text, problem):
    response = operator_client.get(reverse(LIST), {"args": text})
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert "args" in errors and problem in " ".join(errors["args"])


def test_search_by_tag_and_error_text_with_a_state(operator_client):
    tagged = awa.enqueue("tests.noop", args={}, tags=["vip", "eu"])
    awa.enqueue("tests.noop", args={}, tags=["eu"])
    failed = awa.enqueue(
        "tests.always_fails", args={"message": "card 4242 declined"}, max_attempts=1
    )
    run_burst()
    url = reverse(LIST)
    assert listed_ids(operator_client.get(url, {"tag": "vip"})) == [tagged]
    assert listed_ids(operator_client.get(url, {"error": "CARD 4242"})) == [failed]
    assert listed_ids(operator_client.get(url, {"error": "card", "state": "failed"})) == [failed]
    assert listed_ids(operator_client.get(url, {"error": "card", "state": "available"})) == []
    # LIKE wildcards are plain characters.
    assert listed_ids(operator_client.get(url, {"error": "card_4242"})) == []
    assert listed_ids(operator_client.get(url, {"error": "%"})) == []


def test_a_search_stops_after_its_scan_and_continues_older(operator_client, monkeypatch):
    # The indexes find every job with these arguments; the state searched is checked on each,
    # so a page whose candidates are of other states stops after its scan and goes on older.
    monkeypatch.setattr(browse, "SEARCH_BATCH", 5)
    monkeypatch.setattr(browse, "SEARCH_SCAN", 10)
    monkeypatch.setattr(jobs_admin, "SEARCH_SCAN", 10)
    wanted = awa.enqueue("tests.always_fails", args={"message": "a@x"}, max_attempts=1)
    run_burst()
    for _ in range(25):
        awa.enqueue("tests.always_fails", args={"message": "a@x"})
    url = reverse(LIST)
    search = {"args": '{"message": "a@x"}', "state": "failed"}
    first = operator_client.get(url, search)
    assert listed_ids(first) == [] and first.context["page"].scan_stopped
    assert b"search older jobs" in first.content
    seen: list[int] = []
    response = first
    while response.context["next_query"] is not None:
        response = operator_client.get(f"{url}?{response.context['next_query']}")
        seen.extend(listed_ids(response))
    assert seen == [wanted]


def test_newer_pages_walk_back_up_exactly(operator_client, monkeypatch):
    monkeypatch.setattr(jobs_admin, "PAGE_SIZE", 3)
    ids = sorted((awa.enqueue("tests.noop", args={}) for _ in range(10)), reverse=True)
    url = reverse(LIST)
    pages = [operator_client.get(url)]
    assert pages[0].context["newer_query"] is None
    while pages[-1].context["next_query"] is not None:
        pages.append(operator_client.get(f"{url}?{pages[-1].context['next_query']}"))
    assert [listed_ids(page) for page in pages] == [ids[0:3], ids[3:6], ids[6:9], ids[9:]]
    back = pages[-1]
    for expected in reversed(pages[:-1]):
        back = operator_client.get(f"{url}?{back.context['newer_query']}")
        assert listed_ids(back) == listed_ids(expected)
    assert back.context["newer_query"] is None


def test_a_malformed_newer_trail_is_a_form_error(operator_client):
    response = operator_client.get(reverse(LIST), {"newer": "1..2", "before": "5"})
    assert response.status_code == 200 and "newer" in response.context["form"].errors


def test_search_pages_with_no_jobs_and_for_a_viewer(operator_client, viewer_client):
    for client in (operator_client, viewer_client):
        response = client.get(reverse(LIST), {"args": '{"a": 1}', "tag": "x", "error": "y"})
        assert response.status_code == 200 and listed_ids(response) == []


def test_an_undeclared_queue_seen_only_in_the_database_is_searchable(operator_client):
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.deferred_jobs (job_id, state, kind, queue, priority, args, attempt,"
            " run_lease, max_attempts, run_at, created_at, metadata, tags, errors)"
            " VALUES (nextval('awa.job_id_seq'), 'scheduled', 'tests.noop', 'ghost', 2,"
            " '{\"user_id\": 3}', 0, 0, 3, now() + interval '1 hour', now(), '{}', '{}', '[]')"
            " RETURNING job_id"
        )
        (job_id,) = cursor.fetchone()
    url = reverse(LIST)
    assert listed_ids(operator_client.get(url, {"queue": "GHO", "args": '{"user_id": 3}'})) == [
        job_id
    ]
    assert listed_ids(operator_client.get(url, {"state": "scheduled", "queue": "ghost"})) == [
        job_id
    ]


def test_search_by_argument_path(operator_client):
    paris = awa.enqueue("tests.typed", args={"user_id": 7, "email": "a@x", "tags": ["pro"]})
    awa.enqueue("tests.typed", args={"user_id": 8, "email": "7", "tags": ["eu"]})
    url = reverse(LIST)
    for typed in ("user_id:7", "args.user_id: 7", " user_id : 7 ", "email:a@x", 'email:"a@x"'):
        assert listed_ids(operator_client.get(url, {"args": typed})) == [paris], typed
    # A value that reads as JSON is that JSON: 7 is a number, "7" the text.
    assert listed_ids(operator_client.get(url, {"args": "email:7"})) == []
    assert len(listed_ids(operator_client.get(url, {"args": 'email:"7"'}))) == 1
    assert listed_ids(operator_client.get(url, {"args": 'tags:["pro"]'})) == [paris]
    nested = awa.enqueue("tests.echo", args={"user": {"id": 3, "city": "Paris"}})
    assert listed_ids(operator_client.get(url, {"args": "args.user.id:3"})) == [nested]
    assert listed_ids(operator_client.get(url, {"args": "user.city:Paris"})) == [nested]
    bad = operator_client.get(url, {"args": "no path here"})
    assert "or a path such as user_id:7" in " ".join(bad.context["form"].errors["args"])
