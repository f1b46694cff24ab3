"""Binding and JSON validation of job arguments, without a database."""

from __future__ import annotations

import datetime

import pytest

import awa_django as awa
from awa_django.declarations.arguments import bind_arguments
from awa_django.declarations.exact_json import to_json_text


def handler(ctx, user_id: int, email: str, ratio: float = 1.0, flags: dict | None = None):
    return None


def bind(**kwargs):
    return bind_arguments(handler, kwargs, kind="k").args


def test_valid_arguments_bind():
    assert bind(user_id=1, email="a@b", ratio=2) == {"user_id": 1, "email": "a@b", "ratio": 2}


@pytest.mark.parametrize(
    ("kwargs", "field", "fragment"),
    [
        ({"email": "a"}, "args.user_id", "is missing: job 'k' requires it"),
        ({"user_id": 1, "email": "a", "colour": "red"}, "args.colour", "is not an argument"),
        ({"user_id": "1", "email": "a"}, "args.user_id", "must be int"),
        ({"user_id": True, "email": "a"}, "args.user_id", "must be int"),
        ({"user_id": 1, "email": 5}, "args.email", "must be str"),
        ({"user_id": 1, "email": "a", "ratio": float("nan")}, "args.ratio", "must be float"),
        (
            {"user_id": 1, "email": "a", "flags": {"when": datetime.date(2026, 1, 1)}},
            "args.flags.when",
            "is a date, which has no JSON form",
        ),
        ({"user_id": 1, "email": "a", "flags": {1: "x"}}, "args.flags", "has the key 1 (int)"),
        (
            {"user_id": 1, "email": "a", "flags": {"pair": (1, 2)}},
            "args.flags.pair",
            "is a tuple, which would come back as a list",
        ),
    ],
)
def test_bad_arguments_name_the_field(kwargs, field, fragment):
    with pytest.raises(awa.InvalidJob) as caught:
        bind(**kwargs)
    assert fragment in str(caught.value)
    assert str(caught.value).startswith(field)
    assert caught.value.field == field
    assert isinstance(caught.value, ValueError)


def test_handler_without_context_parameter_is_rejected_at_decoration():
    with pytest.raises(TypeError, match="job context as its first"):
        awa.job(lambda: None)


def test_bound_arguments_carry_their_canonical_json_text():
    bound = bind_arguments(handler, {"user_id": 1, "email": "a@b"}, kind="k")
    assert bound.json == '{"user_id":1,"email":"a@b"}'


def test_json_text_is_canonical():
    assert to_json_text({"a": [1, "x"]}, field="args") == '{"a":[1,"x"]}'


def test_a_nul_character_is_refused_at_enqueue_naming_the_argument():
    with pytest.raises(awa.InvalidJob, match="NUL character") as caught:
        bind(user_id=1, email="a\x00b")
    assert caught.value.field == "args.email"
    # An escaped backslash followed by "u0000" is ordinary text.
    assert bind(user_id=1, email="a\\u0000b")["email"] == "a\\u0000b"
