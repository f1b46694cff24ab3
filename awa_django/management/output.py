"""What the operator commands share: plain-text tables, JSON output, a progress line and
argument types."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, is_dataclass
from datetime import datetime
from typing import Any

from django.core.management.base import OutputWrapper

from awa_django.declarations.exact_json import has_lone_surrogate
from awa_django.limits import MAX_ID, MAX_LIMIT, MAX_SECONDS


def _default(value: object) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    raise TypeError(f"not JSON serializable: {value!r}")


def to_json(value: object) -> str:
    """``value`` (dataclasses, datetimes, lists of them) as indented JSON."""
    return json.dumps(value, default=_default, indent=2, sort_keys=True)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A left-aligned text table; None shows as '-'."""
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


class ProgressLine:
    """The running count of a long command (a bulk action's committed batches), rewritten in
    place on a terminal. Written nowhere else (a pipe, a file, a log collector): there the
    command's final line, with the total, is all that is printed."""

    def __init__(self, out: OutputWrapper, template: str) -> None:
        self._out = out
        self._template = template  # with one "{}" for the count
        self._live = out.isatty()
        self._width = 0  # of the count shown last; 0: none shown

    def __call__(self, count: int) -> None:
        if self._live:
            text = self._template.format(count)
            self._out.write(f"\r{text}", ending="")
            self._out.flush()
            self._width = len(text)

    def finish(self, line: str) -> None:
        """Write the final line, over the running count when one is shown."""
        self._out.write(f"\r{line.ljust(self._width)}" if self._width else line)


def seconds(value: str) -> float:
    """A number of seconds from 0 to ``MAX_SECONDS`` (100 years)."""
    try:
        parsed = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    # The range test refuses nan and inf too; past it, now + the value is no date.
    if not 0 <= parsed <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"seconds must be from 0 to {MAX_SECONDS} (100 years), got {value!r}"
        )
    return parsed


def whole_number(low: int, high: int, *, what: str) -> Callable[[str], int]:
    """An argument type: a whole number from ``low`` to ``high``, ``what`` naming it in errors."""

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            number = None  # not digits, or more than Python's 4300
        if number is None or not low <= number <= high:
            raise argparse.ArgumentTypeError(
                f"{what} must be a whole number from {low} to {high}, got {value!r}"
            )
        return number

    return parse


job_id = whole_number(1, MAX_ID, what="a job id")
row_limit = whole_number(1, MAX_LIMIT, what="the limit")


def name(value: str) -> str:
    """A non-empty name or text PostgreSQL can store: no NUL character, and valid Unicode (bytes
    the terminal's encoding cannot decode reach Python as lone surrogates)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    if "\x00" in value or has_lone_surrogate(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not text (a NUL or undecodable byte)")
    return value
