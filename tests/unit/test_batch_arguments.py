"""A batch's short path (``declarations.arguments.json_each``) answers every argument dict as
a single enqueue's binding does: the same JSON text, or the same refusal (#32)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from awa_django.declarations.arguments import bind_arguments, json_each
from awa_django.declarations.exact_json import to_json_text
from awa_django.exceptions import InvalidJob


def typed(ctx: Any, user_id: int, ratio: float = 0.5, name: str = "", flag: bool = False) -> None:
    pass


def anything(ctx: Any, **kwargs: Any) -> None:
    pass


NAMES = st.sampled_from(["user_id", "ratio", "name", "flag", "other", "\x00", "é"])
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
)
VALUES = SCALARS | st.lists(SCALARS, max_size=2) | st.dictionaries(st.text(max_size=2), SCALARS)
# bind_args refuses what is not a mapping before binding, in both paths.
ARG_DICTS = st.dictionaries(NAMES | st.integers(), VALUES, max_size=5)


def answer(call: Any) -> tuple[str, str | None]:
    try:
        return (call(), None)
    except InvalidJob as refusal:
        return (str(refusal), refusal.field)


@given(ARG_DICTS)
def test_the_short_path_answers_as_binding_does(args: Any) -> None:
    for func in (typed, anything, None):

        def bind(position: int, value: Any, func: Any = func) -> str:
            assert position == 0
            if func is None:
                return to_json_text(dict(value), field="args")
            return bind_arguments(func, value, kind="k").json

        def single(func: Any = func) -> str:
            return bind(0, args)

        def batched(func: Any = func) -> str:
            return next(json_each(func, [args], bind))

        assert answer(batched) == answer(single)


def test_plain_dicts_take_the_short_path_and_others_are_bound() -> None:
    bound: list[int] = []

    def bind(position: int, value: Any) -> str:
        bound.append(position)
        return bind_arguments(typed, value, kind="k").json

    dicts = [
        {"user_id": 1, "name": "a"},
        {"user_id": True},  # a bool is no int: bound, and refused there
        {"user_id": 2, "ratio": 1},
        {"user_id": 3, "tags": 1},  # not an argument: bound
    ]
    texts = json_each(typed, dicts, bind)
    assert next(texts) == '{"user_id":1,"name":"a"}'
    try:
        next(texts)
    except InvalidJob as refusal:
        assert refusal.field == "args.user_id"
    else:
        raise AssertionError("a bool passed as an int")
    assert bound == [1]
