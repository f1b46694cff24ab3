"""The awa admin pages under Hypothesis, through Django's test client as a superuser: whatever
the query parameters, URL ids or action forms, every response is below 500. Out-of-range and
non-numeric ids in detail and action URLs are a 404. Each example runs in a transaction rolled
back afterwards, so every one meets the same jobs (available, failed, dead-lettered)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from urllib.parse import quote

import pytest
from django.db import transaction
from django.http import HttpResponse
from django.test import Client
from hypothesis import given, settings
from hypothesis import strategies as st

import awa_django as awa
from tests.conftest import run_burst
from tests.fuzzing import BOUNDARY
from tests.jobs import noop

ADMIN = "/admin/awa_django"
# Every page, with the query parameters it reads.
PAGES = {
    "job": ("job_id", "kind", "queue", "state", "before", "args", "tag", "error", "newer"),
    "deadletter": (
        "job_id",
        "queue",
        "kind",
        "reason",
        "age",
        "error_type",
        "fingerprint",
        "before_at",
        "before_id",
    ),
    "deadletter/groups": ("queue", "kind", "reason", "age"),
    "queue": ("live",),
    "queuedescriptor": (),
    "kinddescriptor": (),
    "runtimeinstance": (),
}
NUMERIC = frozenset({"job_id", "before", "before_id"})
# Past bigint either way, its edges, and the numbers no job has.
BIG = st.sampled_from([2**63 - 1, 2**63, 2**64, 10**30, -(2**63) - 1, 0, -1]).map(str)
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
NUMBERS = BIG | st.integers().map(str) | st.just("9" * 5000)
VALUES = (
    NUMBERS
    | TEXT
    | st.sampled_from(["available", "dlq", "1h", "terminal_error", "default", "1", "1.5"])
    | st.datetimes().map(lambda moment: moment.isoformat())
)
# JSON text a search box may get: documents of every shape, some an object, some not JSON at all.
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(TEXT, children, max_size=3),
    max_leaves=8,
)
JSON_TEXT = (
    JSON_VALUES.map(json.dumps)
    | st.dictionaries(TEXT, JSON_VALUES, max_size=3).map(json.dumps)
    | st.sampled_from(['{"x": "\\u0000"}', '{"x": "\\ud800"}', '{"x": NaN}', "[" * 900, "{"])
)
SEARCHES = {"args": JSON_TEXT, "newer": st.sampled_from(["0", "0.5", "1.2.3", "."]) | TEXT}
IDS = (
    BIG
    | st.integers(min_value=0, max_value=10**25).map(str)
    | st.text(st.characters(codec="ascii", exclude_characters="/?#%"), min_size=1, max_size=25)
    | st.just("0" * 30 + "5")
)


@pytest.fixture
def jobs(operator_client: Client) -> Iterator[dict[str, int]]:
    """Jobs the examples meet: one waiting, one failed, one dead-lettered."""
    failed = awa.enqueue("tests.always_fails", args={}, max_attempts=1)
    dead = awa.enqueue("tests.always_fails", args={}, max_attempts=1)
    run_burst()
    awa.dlq.move_failed(job_ids=[dead])
    yield {"available": noop.enqueue(), "failed": failed, "dlq": dead}


def rolled_back(request: Callable[[], HttpResponse]) -> HttpResponse:
    with transaction.atomic():
        response = request()
        transaction.set_rollback(True)
    return response


@pytest.mark.parametrize("page", sorted(PAGES))
def test_query_parameters_never_answer_500(operator_client, jobs, page):
    # Each parameter the page reads half the time, plus a few it does not read.
    known = st.fixed_dictionaries(
        {},
        optional={
            name: SEARCHES.get(name, NUMBERS if name in NUMERIC else VALUES)
            | st.lists(VALUES, max_size=3)
            for name in PAGES[page]
        },
    )

    # A page that reads no parameter needs only a few examples to show it ignores them.
    @settings(BOUNDARY, max_examples=BOUNDARY.max_examples if PAGES[page] else 20)
    @given(known=known, unknown=st.dictionaries(TEXT, VALUES, max_size=2))
    def check(known: dict[str, object], unknown: dict[str, object]) -> None:
        query = {**unknown, **known}
        response = rolled_back(lambda: operator_client.get(f"{ADMIN}/{page}/", query))
        assert response.status_code < 500

    check()


def test_url_ids_never_answer_500_and_out_of_range_ones_are_404(operator_client, jobs):
    @BOUNDARY
    @given(
        page=st.sampled_from(["job", "deadletter"]),
        action=st.sampled_from(["", "cancel/", "retry/"]),
        job_id=IDS | st.sampled_from(sorted(jobs.values())).map(str),
    )
    def check(page: str, action: str, job_id: str) -> None:
        url = f"{ADMIN}/{page}/{quote(job_id, safe='')}/{action}"
        response = rolled_back(
            lambda: operator_client.post(url) if action else operator_client.get(url)
        )
        assert response.status_code < 500
        if not (job_id.isascii() and job_id.isdigit() and 1 <= int(job_id) < 2**63):
            assert response.status_code == 404

    check()


QUEUE_NAMES = st.sampled_from(["", "default", "email", "nope"]) | TEXT
CONFIRMED = st.sampled_from(["on", "", "yes"]) | TEXT


def form_fields(
    page: str, existing: list[int]
) -> tuple[dict[str, st.SearchStrategy[object]], dict[str, st.SearchStrategy[object]]]:
    """(always sent, sometimes sent) fields of each action form: the DLQ's retry and purge of
    rows, and a queue's controls."""
    if page == "queue":
        action = st.sampled_from(["pause", "resume", "drain"]) | TEXT
        return {"action": action, "queue": QUEUE_NAMES}, {"confirmed": CONFIRMED}
    ids = st.sampled_from(existing).map(str) | BIG | st.integers().map(str)
    return (
        {"action": st.sampled_from(["retry", "purge"]) | TEXT, "job_ids": st.lists(ids | IDS)},
        {"to_queue": QUEUE_NAMES, "confirmed": CONFIRMED},
    )


@pytest.mark.parametrize("page", ["deadletter", "queue"])
def test_action_forms_never_answer_500(operator_client, jobs, page):
    sent, optional = form_fields(page, sorted(jobs.values()))

    @BOUNDARY
    @given(form=st.fixed_dictionaries(sent, optional=optional))
    def check(form: dict[str, object]) -> None:
        response = rolled_back(lambda: operator_client.post(f"{ADMIN}/{page}/act/", form))
        assert response.status_code < 500

    check()


def test_actions_on_everything_matching_never_answer_500(operator_client, jobs):
    @BOUNDARY
    @given(
        page=st.sampled_from(["job", "deadletter"]),
        form=st.fixed_dictionaries(
            {"action": st.sampled_from(["retry", "purge", "cancel", "run_now"]) | TEXT},
            optional={
                "state": VALUES,
                "queue": QUEUE_NAMES,
                "kind": VALUES,
                "reason": VALUES,
                "age": VALUES,
                "error_type": VALUES,
                "fingerprint": VALUES,
                "counted": NUMBERS,
                "confirmed": CONFIRMED,
            },
        ),
    )
    def check(page: str, form: dict[str, object]) -> None:
        response = rolled_back(lambda: operator_client.post(f"{ADMIN}/{page}/act-matching/", form))
        assert response.status_code < 500

    check()
