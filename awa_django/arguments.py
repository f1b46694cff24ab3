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
from dataclasses import dataclass
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


# Built once: json.dumps with options builds a new encoder on every call.
_ENCODER: Final = json.JSONEncoder(allow_nan=False, separators=(",", ":"))
# Exact types whose JSON text always parses back to an equal value of the same type (non-finite
# floats never get that far: the encoder refuses them).
_EXACT_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def _round_trips_exactly(value: object) -> bool:
    """True for a flat dict of string keys and exact scalars, the usual shape of job arguments,
    whose round trip needs no parse to be proven."""
    return type(value) is dict and all(
        type(key) is str and type(item) in _EXACT_SCALARS for key, item in value.items()
    )


def to_json_text(value: object, *, what: str) -> str:
    """``value`` as JSON text, or ``InvalidJob`` naming ``what`` if it does not round-trip."""
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise InvalidJob(f"{what} is not JSON serializable: {exc}", field=what) from None
    # A tuple comes back as a list and a non-string key as a string, and neither compares
    # equal to the original, so this one comparison catches both at any depth.
    if not _round_trips_exactly(value) and json.loads(text) != value:
        raise InvalidJob(
            f"{what} does not survive a JSON round trip unchanged (tuples, non-string keys and "
            "custom types are not allowed); pass plain dicts, lists, strings and numbers",
            field=what,
        )
    # jsonb rejects the NUL character; the text search is the cheap test, the walk the exact one
    # (the text also matches an escaped backslash followed by "u0000").
    if "\\u0000" in text and _has_nul(value):
        raise InvalidJob(
            f"{what} contains a NUL character (\\u0000), which PostgreSQL cannot store in jsonb",
            field=what,
        )
    return text


def storable_text(text: str) -> str:
    """``text`` as PostgreSQL can store it: each NUL character (which jsonb cannot hold) as the
    four characters ``\\x00``, and each lone surrogate (which is not UTF-8, and which json and
    jsonb refuse) as its Python escape, ``\\ud800``. Error messages, tracebacks, cancel reasons
    and progress messages are arbitrary strings, and surrogates are common in them: file names
    from ``os.fsdecode`` and output decoded with ``surrogateescape`` carry undecodable bytes as
    surrogates. Escaped, nothing is lost, and the character stays visible in the stored text."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            text = text.encode(errors="backslashreplace").decode()
    return text


def _has_nul(value: object) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, list):
        return any(_has_nul(item) for item in value)
    if isinstance(value, dict):
        return any(_has_nul(key) or _has_nul(item) for key, item in value.items())
    return False


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
            if name not in spec.names:
                raise InvalidJob(f"job {kind!r} got an unexpected argument {name!r}", field=name)
    for name in spec.required:
        if name not in kwargs:
            raise InvalidJob(f"job {kind!r} is missing required argument {name!r}", field=name)
    for name, (annotation, expected) in spec.checked.items():
        if name in kwargs and not _matches(value := kwargs[name], expected):
            raise InvalidJob(
                f"argument {name!r} of job {kind!r} must be {annotation}, "
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
