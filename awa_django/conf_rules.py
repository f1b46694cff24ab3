"""How a setting says what it accepts: a ``Rule`` in its field's annotation, and one walker.

A field of ``AwaSettings`` or ``QueueSettings`` is annotated ``Annotated[type, rule]``; the rule
holds the check id, the test and the words for what it expects, so its message reads
"AWA['KEY'] must be <expects>, got <value>." ``field_problems`` applies every field's rule to
the raw values given; rules that relate several settings are plain functions in ``conf``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, fields
from functools import cache
from typing import Any, TypeGuard, get_type_hints


@dataclass(frozen=True, slots=True)
class Problem:
    """One invalid setting: a stable check id and a message that says what and how to fix."""

    id: str
    message: str


@dataclass(frozen=True, slots=True)
class Rule:
    """What one setting accepts, and the check id that reports any other value."""

    id: str
    accepts: Callable[[Any], bool]
    # Completes "AWA['KEY'] must be ...": the type, bounds and unit, as the user reads them.
    expects: str
    # False for secrets, whose message must not repeat them.
    echo: bool = True

    def problems(self, where: str, value: object) -> list[Problem]:
        if self.accepts(value):
            return []
        got = f", got {value!r}" if self.echo else ""
        return [Problem(self.id, f"{where} must be {self.expects}{got}.")]


def is_int(value: object) -> TypeGuard[int]:
    # bool is an int subclass, but True is never a count.
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def integer(check_id: str, low: int = 1, high: int | None = None, expects: str = "") -> Rule:
    """An int (never a bool) from ``low`` up to ``high`` (no upper bound when None)."""
    if not expects:
        if high is not None:
            expects = f"an integer {low}..{high}"
        else:
            expects = "a positive integer" if low == 1 else f"an integer >= {low}"
    return Rule(
        check_id,
        lambda v: is_int(v) and v >= low and (high is None or v <= high),
        expects,
    )


def number(check_id: str, *, positive: bool, unit: str = "", note: str = "") -> Rule:
    """An int or float, > 0 when ``positive``, else >= 0; ``unit`` reads " of seconds"."""
    expects = f"a positive number{unit}" if positive else f"a number{unit} >= 0"
    return Rule(
        check_id,
        lambda v: is_number(v) and (v > 0 if positive else v >= 0),
        f"{expects} ({note})" if note else expects,
    )


def between(check_id: str, low: float, high: float) -> Rule:
    """An int or float from ``low`` to ``high``, both included."""
    return Rule(check_id, lambda v: is_number(v) and low <= v <= high, f"between {low} and {high}")


def flag(check_id: str) -> Rule:
    return Rule(check_id, lambda v: isinstance(v, bool), "True or False")


def text(check_id: str) -> Rule:
    return Rule(check_id, lambda v: isinstance(v, str), "a string")


def one_of(check_id: str, choices: Collection[str]) -> Rule:
    return Rule(check_id, lambda v: v in choices, f"one of {list(choices)}")


def list_of(check_id: str, item: type | Callable[[Any], bool], expects: str) -> Rule:
    """A list or tuple whose every item is an instance of ``item``, or passes it."""
    test: Callable[[Any], bool] = (
        (lambda i: isinstance(i, item)) if isinstance(item, type) else item
    )
    return Rule(
        check_id, lambda v: isinstance(v, list | tuple) and all(test(i) for i in v), expects
    )


@cache
def rules_of(cls: type) -> dict[str, Rule]:
    """Each field of the dataclass ``cls`` that carries a rule, in field order."""
    # The module's namespace as globals: without it the class's would be, and a lambda in a
    # rule would not find the module's names when called.
    module = vars(sys.modules[cls.__module__])
    hints = get_type_hints(cls, globalns=module, include_extras=True)
    found: dict[str, Rule] = {}
    for f in fields(cls):
        for extra in getattr(hints[f.name], "__metadata__", ()):
            if isinstance(extra, Rule):
                found[f.name] = extra
    return found


def field_problems(cls: type, raw: Mapping[str, Any], where: str) -> list[Problem]:
    """Every given value of ``raw`` its field's rule refuses (defaults are valid as written).

    ``where`` names the mapping in messages: "AWA" or "AWA['QUEUES']['email']".
    """
    found: list[Problem] = []
    for name, rule in rules_of(cls).items():
        if name in raw:
            found += rule.problems(f"{where}[{name!r}]", raw[name])
    return found
