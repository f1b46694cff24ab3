"""Batched writes that one bad item cannot block: a batch the database refuses for a reason that
retrying cannot cure is split in halves, and the halves again, until the items it refuses on
their own are found; every other item is written. The caller decides what becomes of a refused
item (the completer closes its attempt as failed instead, the heartbeat ends its attempt).

How a failure is judged (``is_transient``): the same write may succeed later when the
connection was lost or the server is going away, when it lost a serialization or deadlock race,
waited too long for a lock, ran out of resources or was cancelled (SQLSTATE classes 08, 40, 53,
57 and 58, and 55P03 lock_not_available), or when psycopg or the pool could not reach the server
at all. Such a failure stops the split and hands what is not written yet back to the caller, to
retry with backoff. Anything else (a value the database refuses: invalid JSON or text, a number
or interval out of range, a row too large; or a Python error building the statement) says
something about the batch's content, and only splitting can tell which item it is about.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

import psycopg

T = TypeVar("T")
R = TypeVar("R")

_TRANSIENT_CLASSES: Final = frozenset({"08", "40", "53", "57", "58"})
_TRANSIENT_STATES: Final = frozenset({"55P03"})


def is_transient(exc: BaseException) -> bool:
    """Whether writing the same thing again later may succeed (see the module docstring)."""
    if isinstance(exc, psycopg.Error):
        if exc.sqlstate is None:
            # Raised by psycopg or its pool without a server's answer: the connection failed,
            # was closed, or none could be had in time.
            return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
        return exc.sqlstate[:2] in _TRANSIENT_CLASSES or exc.sqlstate in _TRANSIENT_STATES
    return isinstance(exc, OSError)


def refusal_reason(exc: Exception) -> str:
    """Why the database refused a write, in a line fit for a job's error list."""
    if isinstance(exc, psycopg.Error) and exc.sqlstate is not None:
        reason = f"{exc.diag.message_primary} (SQLSTATE {exc.sqlstate})"
        detail = exc.diag.message_detail
        return f"{reason}: {detail}" if detail else reason
    return f"{type(exc).__name__}: {exc}"


@dataclass(slots=True)
class SplitWrite(Generic[T, R]):
    """What ``write_apart`` did with a batch."""

    # The items of each write that succeeded, with its answer.
    written: list[tuple[list[T], R]] = field(default_factory=list)
    # Items the database refused on their own, each with the error it gave.
    refused: list[tuple[T, Exception]] = field(default_factory=list)
    # Items not written because of ``error``, a transient failure: write them again later.
    unwritten: list[T] = field(default_factory=list)
    error: Exception | None = None


async def write_apart(
    items: Sequence[T], write: Callable[[list[T]], Awaitable[R]]
) -> SplitWrite[T, R]:
    """Write ``items`` with one call of ``write``, splitting the batch as far as a failure that
    retrying cannot cure requires (one write while nothing fails, about two per item in the
    worst case). A transient failure ends the split at once."""
    split: SplitWrite[T, R] = SplitWrite()
    chunks = [list(items)] if items else []
    while chunks:
        chunk = chunks.pop()
        try:
            answer = await write(chunk)
        except Exception as exc:
            if is_transient(exc):
                split.unwritten = [item for rest in (*chunks, chunk) for item in rest]
                split.error = exc
                return split
            if len(chunk) == 1:
                split.refused.append((chunk[0], exc))
            else:
                half = len(chunk) // 2
                chunks += [chunk[half:], chunk[:half]]
        else:
            split.written.append((chunk, answer))
    return split
