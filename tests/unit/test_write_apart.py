"""Isolating the items a batched write refuses (``worker.isolation``), without a database."""

from __future__ import annotations

import asyncio

import psycopg
import psycopg.errors
import pytest
from psycopg_pool import PoolTimeout

from awa_django.worker.isolation import is_transient, refusal_reason, write_apart


class Refused(Exception):
    """Stands for a value the database refuses."""


def writer(bad: set[int], calls: list[list[int]], *, transient_on: int | None = None):
    async def write(items: list[int]) -> list[int]:
        calls.append(items)
        if transient_on is not None and transient_on in items and len(calls) > 1:
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        if bad & set(items):
            raise Refused(f"refused {sorted(bad & set(items))}")
        return items

    return write


def test_a_batch_that_is_accepted_is_one_write() -> None:
    calls: list[list[int]] = []
    split = asyncio.run(write_apart(range(10), writer(set(), calls)))
    assert calls == [list(range(10))]
    assert split.written == [(list(range(10)), list(range(10)))]
    assert split.refused == [] and split.unwritten == [] and split.error is None


@pytest.mark.parametrize("bad", [{0}, {9}, {3, 4}, {0, 5, 9}, set(range(10))])
def test_every_item_but_the_refused_ones_is_written(bad: set[int]) -> None:
    calls: list[list[int]] = []
    split = asyncio.run(write_apart(list(range(10)), writer(bad, calls)))
    written = sorted(item for items, _ in split.written for item in items)
    assert written == sorted(set(range(10)) - bad)
    assert sorted(item for item, _ in split.refused) == sorted(bad)
    assert all(isinstance(exc, Refused) for _, exc in split.refused)
    assert split.unwritten == [] and split.error is None
    # Each item is in at most one write per level of halving.
    assert len(calls) <= 2 * 10


def test_a_transient_failure_stops_the_split_and_hands_back_the_rest() -> None:
    calls: list[list[int]] = []
    split = asyncio.run(write_apart(list(range(8)), writer({1}, calls, transient_on=6)))
    assert isinstance(split.error, psycopg.OperationalError)
    written = {item for items, _ in split.written for item in items}
    refused = {item for item, _ in split.refused}
    # Nothing is lost or written twice: each item is written, refused or handed back.
    assert sorted([*written, *refused, *split.unwritten]) == list(range(8))
    assert 6 in split.unwritten


def test_nothing_to_write_writes_nothing() -> None:
    calls: list[list[int]] = []
    split = asyncio.run(write_apart([], writer(set(), calls)))
    assert calls == [] and split.written == []


@pytest.mark.parametrize(
    "exc",
    [
        psycopg.OperationalError("consuming input failed: server closed the connection"),
        psycopg.InterfaceError("the connection is closed"),
        PoolTimeout("couldn't get a connection after 30.00 sec"),
        psycopg.errors.SerializationFailure(),
        psycopg.errors.DeadlockDetected(),
        psycopg.errors.LockNotAvailable(),
        psycopg.errors.QueryCanceled(),
        psycopg.errors.AdminShutdown(),
        psycopg.errors.TooManyConnections(),
        ConnectionResetError(),
    ],
)
def test_failures_the_same_write_can_survive_are_transient(exc: BaseException) -> None:
    assert is_transient(exc)


@pytest.mark.parametrize(
    "exc",
    [
        psycopg.errors.InvalidTextRepresentation(),  # invalid input syntax for type json
        psycopg.errors.UntranslatableCharacter(),
        psycopg.errors.DatetimeFieldOverflow(),  # an interval out of range
        psycopg.errors.NumericValueOutOfRange(),
        psycopg.errors.ProgramLimitExceeded(),  # a row or a jsonb value too large
        psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes"),
        psycopg.errors.InsufficientPrivilege(),
        UnicodeEncodeError("utf-8", "\udcff", 0, 1, "surrogates not allowed"),
        ValueError("Unknown format code 'd' for object of type 'str'"),
    ],
)
def test_failures_about_what_was_written_are_not(exc: BaseException) -> None:
    assert not is_transient(exc)


def test_a_refusal_reason_names_the_database_error_or_the_exception() -> None:
    assert refusal_reason(ValueError("bad address")) == "ValueError: bad address"
