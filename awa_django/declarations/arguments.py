"""Validation of job arguments at enqueue time, before anything is written.

Arguments are keyword-only, bound against the handler's signature (minus its leading context
parameter), checked against simple builtin annotations, and must come back from storage
exactly as given (``awa_django.declarations.exact_json``), because that is what the worker
will hand back to the handler. ``InvalidJob.field`` is the argument's path under ``args``:
``args.user_id``.
"""

from __future__ import annotations

import inspect
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Final, NamedTuple

from awa_django.declarations.exact_json import path_of, to_json_text
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


class BoundArgs(NamedTuple):
    """Validated job arguments and their JSON text (what is stored and handed back)."""

    args: dict[str, Any]
    json: str


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


@dataclass(frozen=True, slots=True)
class _ArgSpec:
    """What binding needs from a handler's signature, worked out once per handler."""

    names: frozenset[str]
    required: tuple[str, ...]
    takes_extra: bool
    # Argument name -> (annotation name, accepted types), for the annotations we can check.
    checked: dict[str, tuple[str, tuple[type, ...]]]


@cache
def _arg_spec(func: Callable[..., object]) -> _ArgSpec:
    params = handler_parameters(func)
    try:
        hints = typing.get_type_hints(func)
    except Exception:
        hints = {}
    checked = {}
    for param in params:
        expected = _CHECKABLE.get(hints.get(param.name))
        if expected is not None:
            checked[param.name] = (hints[param.name].__name__, expected)
    return _ArgSpec(
        names=frozenset(p.name for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD),
        required=tuple(
            p.name
            for p in params
            if p.default is inspect.Parameter.empty and p.kind is not inspect.Parameter.VAR_KEYWORD
        ),
        takes_extra=any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params),
        checked=checked,
    )


def bind_arguments(
    func: Callable[..., object], kwargs: Mapping[str, object], *, kind: str
) -> BoundArgs:
    """Check ``kwargs`` against ``func``'s signature and the JSON contract."""
    spec = _arg_spec(func)
    if not spec.takes_extra:
        for name in kwargs:
            # A name that is not a string is refused below, as every non-string key is.
            if isinstance(name, str) and name not in spec.names:
                field = path_of("args", (name,))
                raise InvalidJob(f"{field} is not an argument of job {kind!r}", field=field)
    for name in spec.required:
        if name not in kwargs:
            field = path_of("args", (name,))
            raise InvalidJob(f"{field} is missing: job {kind!r} requires it", field=field)
    for name, (annotation, expected) in spec.checked.items():
        if name in kwargs and not _matches(value := kwargs[name], expected):
            field = path_of("args", (name,))
            raise InvalidJob(
                f"{field} must be {annotation} for job {kind!r}, "
                f"got {type(value).__name__} {value!r}",
                field=field,
            )
    args = dict(kwargs)
    return BoundArgs(args, to_json_text(args, field="args"))


def _matches(value: object, expected: tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in expected:
        return False  # True is an int to Python, not to a handler that asked for a number
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return isinstance(value, expected)
