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
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Final, NamedTuple

from awa_django.declarations.exact_json import is_plain_flat, path_of, plain_text, to_json_text
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


# The types of a plain argument's value that _matches accepts by their exact type.
_PLAIN_SCALARS: Final = frozenset({int, float, str, bool})


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
    # Argument name -> the scalar types its annotation accepts as they are, for the checked
    # arguments (a bool is not an int here, as _matches has it; lists and dicts are no scalars).
    scalar_types: dict[str, frozenset[type]]


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
        scalar_types={
            name: frozenset(t for t in expected if t in _PLAIN_SCALARS)
            for name, (_, expected) in checked.items()
        },
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


def json_each(
    func: Callable[..., object] | None,
    arg_dicts: Iterable[object],
    bind: Callable[[int, object], str],
) -> Iterator[str]:
    """The stored JSON text of each argument dict of a batch, ``func``'s arguments (None: a
    kind without a handler, JSON only), as ``bind(position, args)`` gives it for one dict.

    A batch's dicts have one shape as a rule: a plain dict of scalars (``is_plain_flat``)
    whose names the signature takes, holding every required one, each checked value of a type
    its annotation takes as it is, is encoded at once, with no call per argument. ``bind``
    decides every other dict, accepting or refusing it as a single enqueue would, so the short
    path changes no answer: it only accepts what ``bind`` accepts, with the same text.
    """
    spec = None if func is None else _arg_spec(func)
    names = None if spec is None or spec.takes_extra else spec.names
    required = frozenset(() if spec is None else spec.required)
    # A tuple, iterated with no call per dict.
    checks = () if spec is None else tuple(spec.scalar_types.items())
    for position, args in enumerate(arg_dicts):
        text = None
        if is_plain_flat(args):
            keys = args.keys()
            if (names is None or keys <= names) and required <= keys:
                for name, types in checks:
                    if name in args and type(args[name]) not in types:
                        break
                else:
                    text = plain_text(args)
        yield bind(position, args) if text is None else text
