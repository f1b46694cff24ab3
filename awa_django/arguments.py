"""Validation of job arguments at enqueue time, before anything is written.

Arguments are keyword-only, bound against the handler's signature (minus its leading context
parameter), checked against simple builtin annotations, and must survive a JSON round trip
unchanged, because that is what the worker will hand back to the handler.
"""

from __future__ import annotations

import inspect
import json
import math
import typing
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, Final, NamedTuple

from awa_django.exceptions import InvalidJob

# Annotations we can check cheaply and unambiguously; anything else is only JSON-checked.
_CHECKABLE: Final[dict[Any, tuple[type, ...]]] = {
    int: (int,),
    float: (int, float),
    str: (str,),
    bool: (bool,),
    list: (list,),
    dict: (dict,),
}


def to_json_text(value: object, *, what: str) -> str:
    """``value`` as JSON text, or ``InvalidJob`` naming ``what`` if it does not round-trip."""
    try:
        text = json.dumps(value, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidJob(f"{what} is not JSON serializable: {exc}", field=what) from None
    if json.loads(text) != value or _has_tuple(value):
        raise InvalidJob(
            f"{what} does not survive a JSON round trip unchanged (tuples, non-string keys and "
            "custom types are not allowed); pass plain dicts, lists, strings and numbers",
            field=what,
        )
    return text


class BoundArgs(NamedTuple):
    """Validated job arguments and their JSON text (what is stored and handed back)."""

    args: dict[str, Any]
    json: str


def args_json_text(args: Mapping[str, object], *, kind: str) -> str:
    """``args`` as JSON text; ``InvalidJob`` names the argument that does not round-trip.

    One round trip for the whole dict: checking each argument separately costs a dump and a
    parse per argument on every enqueue, and is only needed to name the culprit."""
    try:
        return to_json_text(args, what=f"args of job {kind!r}")
    except InvalidJob as whole:
        for name, value in args.items():
            to_json_text(value, what=f"argument {name!r} of job {kind!r}")
        raise whole


def _has_tuple(value: object) -> bool:
    if isinstance(value, tuple):
        return True
    if isinstance(value, list):
        return any(_has_tuple(item) for item in value)
    if isinstance(value, dict):
        return any(_has_tuple(item) for item in value.values())
    return False


@cache
def handler_parameters(func: Callable[..., object]) -> tuple[inspect.Parameter, ...]:
    """The handler's parameters after the leading context parameter."""
    params = list(inspect.signature(func).parameters.values())
    if not params or params[0].kind not in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        raise TypeError(
            f"job handler {func.__qualname__} must take the job context as its first "
            "positional parameter, e.g. def handler(ctx, **args)"
        )
    for param in params[1:]:
        if param.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL):
            raise TypeError(
                f"job handler {func.__qualname__}: parameter {param.name!r} must be passable "
                "by keyword (job arguments are stored by name)"
            )
    return tuple(params[1:])


@cache
def _annotations(func: Callable[..., object]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(func)
    except Exception:
        return {}


def bind_arguments(
    func: Callable[..., object], kwargs: Mapping[str, object], *, kind: str
) -> BoundArgs:
    """Check ``kwargs`` against ``func``'s signature and the JSON contract."""
    params = handler_parameters(func)
    by_name = {p.name: p for p in params}
    takes_extra = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    for name in kwargs:
        if name not in by_name and not takes_extra:
            raise InvalidJob(f"job {kind!r} got an unexpected argument {name!r}", field=name)
    for param in params:
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        if param.default is inspect.Parameter.empty and param.name not in kwargs:
            raise InvalidJob(
                f"job {kind!r} is missing required argument {param.name!r}", field=param.name
            )
    hints = _annotations(func)
    for name, value in kwargs.items():
        expected = _CHECKABLE.get(hints.get(name))
        if expected is not None and not _matches(value, expected):
            raise InvalidJob(
                f"argument {name!r} of job {kind!r} must be {hints[name].__name__}, "
                f"got {type(value).__name__} {value!r}",
                field=name,
            )
    args = dict(kwargs)
    return BoundArgs(args, args_json_text(args, kind=kind))


def _matches(value: object, expected: tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in expected:
        return False  # True is an int to Python, not to a handler that asked for a number
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return isinstance(value, expected)
