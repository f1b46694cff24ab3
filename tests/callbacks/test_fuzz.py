"""The callback endpoint under Hypothesis: whatever the body or headers, it answers a JSON 4xx
(or 200), never 500. Every example runs in a transaction rolled back afterwards, so each one
meets the same live, waiting callback and exercises the database path too."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import pytest
from django.db import transaction
from django.http import HttpResponse
from django.test import Client, override_settings
from hypothesis import assume, given
from hypothesis import strategies as st

import awa_django as awa
from awa_django.callbacks.external import ACTIONS
from awa_django.limits import MAX_SECONDS
from tests.callbacks.helpers import FAST, SECRET, park_one
from tests.fuzzing import BOUNDARY

pytestmark = [pytest.mark.usefixtures("awa_db"), pytest.mark.django_db(transaction=True)]

FIELDS = ("payload", "error", "delay_s", "timeout_s")
# Any code point, lone surrogates included: JSON can carry them as \ud800 escapes.
ANY_TEXT = st.text(st.characters(codec=None, categories=None, exclude_categories=()))
NUMBERS = (
    st.integers()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([1e300, 1e12, 3153600000, 3153600001, -1, 0, 0.0, -0.0, 2**63, 2**64])
)
SCALARS = st.none() | st.booleans() | NUMBERS | ANY_TEXT
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=20,
)


def dumps(value: object, ascii_only: bool) -> bytes:
    # allow_nan (the default) writes NaN and Infinity, which are not JSON; a text with a lone
    # surrogate is written as is when not ascii_only, so surrogatepass gives invalid UTF-8.
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


# The field each action reads (docs/callbacks.md), and values for it that are mostly valid.
OWN_FIELD = {"complete": "payload", "fail": "error", "retry": "delay_s", "heartbeat": "timeout_s"}
SECONDS = st.floats(min_value=0, max_value=MAX_SECONDS) | st.integers(0, MAX_SECONDS) | NUMBERS
OWN_VALUES = {
    "payload": JSON_VALUES,
    "error": ANY_TEXT | JSON_VALUES,
    "delay_s": SECONDS | JSON_VALUES,
    "timeout_s": SECONDS | JSON_VALUES,
}


@st.composite
def bodies(draw: st.DrawFn, action: str) -> bytes:
    """Request bodies: the action's own field with any value (most often, so that many get as
    far as the database), objects of any fields, any JSON value, JSON nested far past any limit,
    or arbitrary bytes."""
    kind = draw(st.sampled_from(["own", "own", "own", "fields", "value", "deep", "bytes"]))
    if kind == "own":
        field = OWN_FIELD.get(action, "payload")
        return dumps({field: draw(OWN_VALUES[field])}, draw(st.booleans()))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "deep":
        depth = draw(st.integers(min_value=90, max_value=32_000))
        field = draw(st.sampled_from(FIELDS))
        return f'{{"{field}": {"[" * depth}{"]" * depth}}}'.encode()
    if kind == "value":
        return dumps(draw(JSON_VALUES), draw(st.booleans()))
    names = st.sampled_from(FIELDS) | ANY_TEXT
    return dumps(draw(st.dictionaries(names, JSON_VALUES, max_size=3)), draw(st.booleans()))


def tokens(live: str) -> st.SearchStrategy[str]:
    """Mostly the live token; else token-shaped ones past bigint or forged, or any text."""
    return st.one_of(
        st.just(live),
        st.just(live),
        st.builds(
            lambda job, lease, secret: f"{job}-{lease}-{secret}",
            st.integers(min_value=0, max_value=10**20),
            st.integers(min_value=0, max_value=10**20),
            st.from_regex(r"\A[0-9a-f]{32}\Z"),
        ),
        st.text(st.characters(codec="ascii", exclude_characters="/?#%"), min_size=1, max_size=60),
    )


@pytest.fixture
def live() -> Iterator[str]:
    """The token of a parked callback. The worker that parked it is stopped first: nothing else
    may touch the callback (or Python's random state) while Hypothesis runs."""
    _, token = park_one()
    yield token


def rolled_back(request: Callable[[], HttpResponse]) -> HttpResponse:
    """``request``'s response; whatever it wrote is rolled back."""
    with transaction.atomic():
        response = request()
        transaction.set_rollback(True)
    return response


def assert_answered(response: HttpResponse) -> None:
    assert response.status_code < 500, response.content
    if response.status_code == 200:
        assert response.json()["ok"] is True
    elif response.get("Content-Type") == "application/json":
        assert response.json()["error"]


def test_validly_signed_bodies_never_answer_500(live):
    client = Client()

    @BOUNDARY
    @given(action=st.sampled_from([*ACTIONS * 3, "delete"]), token=tokens(live), data=st.data())
    def check(action: str, token: str, data: st.DataObject) -> None:
        body = data.draw(bodies(action), label="body")
        headers = awa.sign_callback(token, body, action=action, secret=SECRET)
        response = rolled_back(
            lambda: client.post(
                f"/awa/callbacks/{quote(token, safe='')}/{action}",
                data=body,
                content_type="application/json",
                headers=headers,
            )
        )
        assert_answered(response)
        if token == live and action in ACTIONS:
            # The view itself answered: always JSON.
            assert response["Content-Type"] == "application/json"

    check()


# What a server hands a view: latin-1 text without control characters.
HEADER_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=80)


def fewer_bytes_than_declared(content_length: str | None, size: int, max_body: int) -> bool:
    try:
        declared = int(content_length or 0)
    except ValueError:
        return False
    return size < declared <= max_body


def test_unsigned_and_garbled_headers_never_answer_500(live):
    client = Client()

    @BOUNDARY
    @given(
        action=st.sampled_from(ACTIONS),
        body=bodies("complete"),
        timestamp=st.none() | HEADER_TEXT | st.integers().map(str),
        signature=st.none()
        | HEADER_TEXT
        | st.from_regex(r"\Asha256=[0-9a-fA-F]{0,70}\Z")
        | st.just("valid"),
        content_length=st.none() | HEADER_TEXT | st.integers().map(str),
        max_body=st.sampled_from([65536, 16]),
        content_type=st.sampled_from(["application/json", "text/plain", "", "multipart/form-data"]),
    )
    def check(
        action: str,
        body: bytes,
        timestamp: str | None,
        signature: str | None,
        content_length: str | None,
        content_type: str,
        max_body: int,
    ) -> None:
        # Django's test client cannot promise more bytes than the body has (a server would
        # wait for them): such a length is only sent when the view refuses it unread.
        assume(not fewer_bytes_than_declared(content_length, len(body), max_body))
        headers: dict[str, str] = {}
        if signature == "valid":
            headers = awa.sign_callback(live, body, action=action, secret=SECRET)
        elif signature is not None:
            headers["X-Awa-Signature"] = signature
        if timestamp is not None:
            headers["X-Awa-Timestamp"] = timestamp
        environ: dict[str, Any] = {}
        if content_length is not None:
            environ["CONTENT_LENGTH"] = content_length
        with override_settings(AWA={**FAST, "CALLBACK_MAX_BODY_BYTES": max_body}):
            response = rolled_back(
                lambda: client.post(
                    f"/awa/callbacks/{live}/{action}",
                    data=body,
                    content_type=content_type,
                    headers=headers,
                    **environ,
                )
            )
        assert_answered(response)
        assert response["Content-Type"] == "application/json"

    check()
