"""The JSON text awa stores, and what it refuses, without a database (the database's side is in
tests/test_exact_values.py)."""

from __future__ import annotations

import datetime
import enum
import json
import sys
from collections import OrderedDict
from decimal import Decimal

import pytest

import awa_django as awa
from awa_django.declarations.exact_json import (
    MAX_DEPTH,
    check_text,
    exact_text,
    moved,
    storable_text,
    to_json_text,
)


class Colour(enum.StrEnum):
    RED = "red"


class Size(enum.IntEnum):
    LARGE = 3


class Ratio(float):
    pass


def nested(depth: int) -> object:
    """``depth`` lists, one inside the other."""
    value: list[object] = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1e16, "10000000000000000.0"),
        (-1.2345e20, "-123450000000000000000.0"),
        (9999999999999998.0, "9999999999999998.0"),
        (1e-7, "1e-07"),
        (5e-324, "5e-324"),
        (1.5, "1.5"),
        (10**20, "100000000000000000000"),
    ],
)
def test_floats_from_1e16_up_are_written_out_in_full(value, text):
    # jsonb keeps a number's scale but not its exponent: "1e+16" would come back as an int.
    assert to_json_text({"x": value}, field="args") == f'{{"x":{text}}}'
    assert to_json_text({"x": [value]}, field="args") == f'{{"x":[{text}]}}'
    back = json.loads(text)
    assert type(back) is type(value) and back == value


def test_a_float_of_1e308_keeps_its_value_and_type_written_out():
    text = to_json_text({"x": 1e308}, field="args")
    assert "e" not in text and text.endswith(".0}")
    back = json.loads(text)["x"]
    assert type(back) is float and back == 1e308


@pytest.mark.parametrize(
    ("value", "field", "fragment"),
    [
        ({"x": -0.0}, "args.x", "is -0.0"),
        ({"x": [1, -0.0]}, "args.x[1]", "is -0.0"),
        ({"x": float("nan")}, "args.x", "is nan"),
        ({"x": {"y": float("-inf")}}, "args.x.y", "is -inf"),
        ({"x": "a\x00b"}, "args.x", "NUL character"),
        ({"x": ["ok", "\ud800"]}, "args.x[1]", "lone surrogate U+D800"),
        ({"x": {"a\x00": 1}}, "args.x", "has the key 'a\\x00'"),
        ({"x": {"\udfff": 1}}, "args.x", "lone surrogate U+DFFF"),
        ({"x": (1, 2)}, "args.x", "is a tuple, which would come back as a list"),
        ({"x": {1: "a"}}, "args.x", "has the key 1 (int)"),
        ({"x": {None: "a"}}, "args.x", "has the key None"),
        ({"x": Colour.RED}, "args.x", "is a Colour (a subclass of str)"),
        ({"x": [Size.LARGE]}, "args.x[0]", "is a Size (a subclass of int)"),
        ({"x": Ratio(0.5)}, "args.x", "is a Ratio (a subclass of float)"),
        ({"x": OrderedDict(a=1)}, "args.x", "is a OrderedDict (a subclass of dict)"),
        ({"x": {1, 2}}, "args.x", "is a set, which has no JSON form"),
        ({"x": Decimal("1.5")}, "args.x", "is a Decimal, which has no JSON form"),
        ({"at": datetime.datetime(2026, 1, 1)}, "args.at", "is a datetime"),
        ({"odd key": {"x y": b"bytes"}}, "args['odd key']['x y']", "is a bytes"),
        ({"deep": nested(MAX_DEPTH)}, "args.deep" + "[0]" * (MAX_DEPTH - 1), "nested more"),
    ],
)
def test_values_that_would_not_come_back_exactly_are_refused_naming_their_path(
    value, field, fragment
):
    with pytest.raises(awa.InvalidJob) as refused:
        to_json_text(value, field="args")
    assert refused.value.field == field
    assert str(refused.value).startswith(f"{field} ")
    assert fragment in str(refused.value)


def test_depth_is_counted_from_the_value_itself():
    assert to_json_text(nested(MAX_DEPTH), field="x") == "[" * MAX_DEPTH + "]" * MAX_DEPTH
    with pytest.raises(awa.InvalidJob, match="nested more than 100"):
        to_json_text(nested(MAX_DEPTH + 1), field="x")


def test_ten_thousand_levels_of_nesting_are_refused_not_a_recursion_error():
    with pytest.raises(awa.InvalidJob) as refused:
        to_json_text({"deep": nested(10_000)}, field="metadata")
    assert refused.value.field.startswith("metadata.deep[0][0]")


def test_a_list_that_contains_itself_is_refused():
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(awa.InvalidJob, match="nested more than"):
        to_json_text({"loop": loop}, field="args")


def test_an_int_too_long_for_text_is_refused():
    previous = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(1000)
    try:
        with pytest.raises(awa.InvalidJob) as refused:
            to_json_text({"n": [10**1500]}, field="args")
        assert refused.value.field == "args.n[0]"
        assert to_json_text({"n": 10**900}, field="args") == '{"n":1' + "0" * 900 + "}"
    finally:
        sys.set_int_max_str_digits(previous)


@pytest.mark.parametrize(
    "text",
    [
        "plain",
        "é 漢 😀",
        "a backslash before u0000: \\u0000",
        "a backslash before ud800: \\ud800",
        "exponent-looking text: 1e+16 -0.0",
    ],
)
def test_text_that_only_looks_suspicious_is_kept(text):
    assert json.loads(to_json_text({text: text}, field="args")) == {text: text}


def test_characters_beyond_the_bmp_are_kept():
    assert json.loads(to_json_text({"emoji": "😀"}, field="args")) == {"emoji": "😀"}


def test_check_text_names_the_field():
    check_text("fine 😀", field="tags[0]")
    with pytest.raises(awa.InvalidJob) as refused:
        check_text("x\x00", field="tags[3]")
    assert refused.value.field == "tags[3]"
    with pytest.raises(awa.InvalidJob, match=r"lone surrogate U\+D83D"):
        check_text("\ud83d", field="ordering_key")


def test_storable_text_escapes_what_postgres_cannot_store():
    assert storable_text("a\x00b") == "a\\x00b"
    assert storable_text("a\ud800b😀") == "a\\ud800b😀"
    assert storable_text("plain é") == "plain é"


def test_exact_text_writes_out_large_floats_of_values_built_by_awa():
    assert exact_text({"percent": 50, "checkpoint": {"big": 1e16}}) == (
        '{"percent":50,"checkpoint":{"big":10000000000000000.0}}'
    )
    assert exact_text({"message": "1e+16"}) == '{"message":"1e+16"}'


def test_moved_restates_a_refusal_under_the_callers_name():
    refusal = awa.InvalidJob("args.x[1] is -0.0", field="args.x[1]")
    restated = moved(refusal, "args", "args_list[4]")
    assert (restated.field, str(restated)) == ("args_list[4].x[1]", "args_list[4].x[1] is -0.0")
    other = awa.InvalidJob("argsy is bad", field="argsy")
    assert moved(other, "args", "args_list[4]") is other
