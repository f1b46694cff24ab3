"""The executors of a storage statement: a Django cursor, Django's connection itself (``run_on``)
and a worker's psycopg connection must give the same answer for the same statement."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, TypeVar

import psycopg
import pytest
from django.db import DataError, connection, connections

import awa_django as awa
from awa_django.core.claimed_job import ClaimedJob, claimed_job_rows
from awa_django.core.completion import Completion
from awa_django.core.outcome import Outcome
from awa_django.storage.connections import connect
from awa_django.storage.execution import close_attempts
from awa_django.storage.queue import ClaimRequest, claim_ready, queue_depths
from awa_django.storage.statement import (
    ROWS_PER_WRITE,
    Atomic,
    Copy,
    Read,
    Statement,
    Steps,
    all_rows,
    first_int,
    first_value,
    nothing,
    run,
    run_async,
    run_atomic,
    run_atomic_async,
    run_copy,
    run_on,
    run_read,
    step,
)

pytestmark = pytest.mark.usefixtures("awa_db", "storage_kinds")

T = TypeVar("T")

DOCUMENT = Statement(
    sql="SELECT %(doc)s::jsonb AS doc, 2 AS n, NULL::jsonb AS missing",
    params={"doc": '{"a": [1, 2.5, "ß"], "b": null}'},
    read=all_rows,
    json=("doc", "missing"),
)


def on_django(statement: Statement[T]) -> T:
    with connection.cursor() as cursor:
        return run(cursor, statement)


def on_connection(statement: Statement[T]) -> T:
    return run_on(connections["default"], statement)


def on_psycopg(statement: Statement[T]) -> T:
    async def main() -> T:
        async with await connect("default") as conn:
            return await run_async(conn, statement)

    return asyncio.run(main())


def test_declared_jsonb_columns_come_back_parsed_from_both_connections() -> None:
    expected = [({"a": [1, 2.5, "ß"], "b": None}, 2, None)]
    assert on_django(DOCUMENT) == expected
    assert on_connection(DOCUMENT) == expected
    assert on_psycopg(DOCUMENT) == expected


def test_undeclared_jsonb_is_text_on_django_and_parsed_on_psycopg() -> None:
    # Why a statement names its jsonb columns: the two connections disagree on them.
    undeclared = dataclasses.replace(DOCUMENT, json=())
    ((django_doc, _, _),) = on_django(undeclared)
    ((psycopg_doc, _, _),) = on_psycopg(undeclared)
    assert isinstance(django_doc, str)
    assert psycopg_doc == {"a": [1, 2.5, "ß"], "b": None}


def test_rows_are_made_once_per_result_and_a_statement_without_rows_reads_nothing() -> None:
    made: list[tuple[str, ...]] = []

    def pairs(names: tuple[str, ...]) -> Any:
        made.append(names)
        return lambda values: dict(zip(names, values, strict=True))

    statement = Statement(
        sql="SELECT i AS n, i * 2 AS twice FROM generate_series(1, 3) i", read=all_rows, rows=pairs
    )
    expected = [{"n": i, "twice": 2 * i} for i in (1, 2, 3)]
    assert on_django(statement) == expected
    assert on_connection(statement) == expected
    assert on_psycopg(statement) == expected
    assert made == [("n", "twice")] * 3
    no_result = Statement(sql="DO $$ BEGIN END $$", read=nothing)
    assert on_django(no_result) is None
    assert on_connection(no_result) is None
    assert on_psycopg(no_result) is None


def test_django_reads_timestamps_alike_through_its_cursor_and_its_connection() -> None:
    # run_on's cursor is Django's own: the connection's time zone, as a Django cursor has it.
    at = Statement(sql="SELECT '2026-12-05 08:00:00+00'::timestamptz", read=first_value)
    by_cursor, by_connection = on_django(at), on_connection(at)
    assert by_cursor == by_connection
    assert by_cursor.tzinfo == by_connection.tzinfo


def test_errors_on_djangos_connection_are_djangos_and_leave_it_usable() -> None:
    with pytest.raises(DataError) as raised:
        on_connection(FAILS)
    assert isinstance(raised.value.__cause__, psycopg.errors.DivisionByZero)
    assert on_connection(Statement(sql="SELECT 2", read=first_int)) == 2


def test_queue_depths_are_the_same_on_both_connections() -> None:
    awa.enqueue("k.depth", args={})
    awa.enqueue("k.depth", args={}, queue="email")
    by_django, by_psycopg = on_django(queue_depths()), on_psycopg(queue_depths())
    assert {d.queue: d.available for d in by_django} == {"default": 1, "email": 1}
    # The lag is measured anew by each read.
    assert all(isinstance(d.lag_s, float) for d in by_django + by_psycopg)
    assert [dataclasses.replace(d, lag_s=0.0) for d in by_psycopg] == [
        dataclasses.replace(d, lag_s=0.0) for d in by_django
    ]


def _comparable(job: ClaimedJob) -> dict[str, Any]:
    values = dataclasses.asdict(job)
    for varying in ("job_id", "lane_seq", "run_at", "created_at", "claimed_at"):
        values[varying] = type(values[varying])
    return values


def test_a_claim_and_its_close_answer_alike_on_both_connections() -> None:
    args = {"n": 1, "nested": {"x": [1.5, None]}}
    for _ in range(2):
        awa.enqueue("k.same", args=args, metadata={"tenant": "t"}, tags=["a"])
    request = ClaimRequest(queue="default", claimed_by="executors", deadline_s=0)
    (by_django,) = on_django(claim_ready(request, rows=claimed_job_rows, limit=1))
    (by_psycopg,) = on_psycopg(claim_ready(request, rows=claimed_job_rows, limit=1))
    assert by_django.args == args and by_django.metadata == {"tenant": "t"}
    assert _comparable(by_django) == _comparable(by_psycopg)
    assert by_django.job_id != by_psycopg.job_id
    closed_django = on_django(close_attempts([Completion.of(by_django, Outcome.COMPLETED)]))
    closed_psycopg = on_psycopg(close_attempts([Completion.of(by_psycopg, Outcome.COMPLETED)]))
    assert closed_django == {(by_django.job_id, by_django.run_lease): None}
    assert closed_psycopg == {(by_psycopg.job_id, by_psycopg.run_lease): None}


PROBE_CREATE = Statement(sql="CREATE TEMP TABLE atomic_probe (n integer)", read=nothing)
PROBE_DROP = Statement(sql="DROP TABLE atomic_probe", read=nothing)
PROBE_ADD = Statement(sql="INSERT INTO atomic_probe VALUES (1)", read=nothing)
PROBE_COUNT = Statement(sql="SELECT count(*) FROM atomic_probe", read=first_int)
FAILS = Statement(sql="SELECT 1 / 0", read=first_int)


def test_an_atomic_answers_with_its_last_statement_and_commits_all_or_none_on_django() -> None:
    with connection.cursor() as cursor:
        run(cursor, PROBE_CREATE)
        try:
            assert run_atomic(cursor, Atomic((PROBE_ADD, PROBE_ADD), PROBE_COUNT)) == 2
            with pytest.raises(DataError):
                run_atomic(cursor, Atomic((PROBE_ADD,), FAILS))
            # The failed one's insert went with it; the caller's transaction goes on.
            assert run(cursor, PROBE_COUNT) == 2
        finally:
            run(cursor, PROBE_DROP)


def test_an_atomic_answers_with_its_last_statement_and_commits_all_or_none_on_psycopg() -> None:
    async def main() -> tuple[int, int]:
        async with await connect("default") as conn:
            await run_async(conn, PROBE_CREATE)
            answer = await run_atomic_async(conn, Atomic((PROBE_ADD, PROBE_ADD), PROBE_COUNT))
            with pytest.raises(psycopg.errors.DivisionByZero):
                await run_atomic_async(conn, Atomic((PROBE_ADD,), FAILS))
            return answer, await run_async(conn, PROBE_COUNT)

    assert asyncio.run(main()) == (2, 2)


WORK_MEM = Statement(sql="SELECT current_setting('work_mem')", read=first_value)
TRANSACTION = Statement(sql="SELECT txid_current()", read=first_int)


def _doubled_twice() -> Steps[tuple[int, int, str]]:
    # Each statement is built from the answer of the one before it.
    first = yield from step(TRANSACTION)
    n = 1
    for _ in range(2):
        n = yield from step(Statement(sql="SELECT %(n)s * 2", params={"n": n}, read=first_int))
    assert (yield from step(TRANSACTION)) == first
    return first, n, (yield from step(WORK_MEM))


def _set_work_mem(before: str) -> Statement[None]:
    return Statement(
        sql="SELECT set_config('work_mem', %(v)s, true)", params={"v": before}, read=nothing
    )


PLANNED = Read(
    steps=_doubled_twice,
    plan=Statement(
        sql="WITH b AS MATERIALIZED (SELECT current_setting('work_mem') AS v)"
        " SELECT v, set_config('work_mem', '7MB', true) FROM b",
        read=first_value,
    ),
    restore=_set_work_mem,
)


def test_a_read_runs_its_steps_in_one_transaction_under_its_settings() -> None:
    from django.db import transaction

    with connection.cursor() as cursor:
        before = run(cursor, WORK_MEM)
        _, doubled, planned = run_read(cursor, PLANNED)
        assert (doubled, planned) == (4, "7MB")
        # Outside a transaction the settings end with the read's own.
        assert run(cursor, WORK_MEM) == before
        with transaction.atomic():
            outer = run(cursor, TRANSACTION)
            transaction_id, _, planned = run_read(cursor, PLANNED)
            assert (transaction_id, planned) == (outer, "7MB")
            # Inside the caller's, they are put back for its later statements.
            assert run(cursor, WORK_MEM) == before


def test_a_copy_streams_the_rows_its_reservation_places_and_answers_from_it() -> None:
    # More rows than one write holds, each numbered from what the reservation answered.
    count = 2 * ROWS_PER_WRITE + 3
    copy = Copy(
        reserve=Statement(
            sql="SELECT ARRAY(SELECT 100 + n FROM generate_series(1, %(count)s) AS n)",
            params={"count": count},
            read=first_value,
        ),
        sql="COPY atomic_probe (n) FROM STDIN",
        lines=lambda numbers: (f"{n}\n" for n in numbers),
        answer=lambda numbers: numbers[-1],
    )
    with connection.cursor() as cursor:
        run(cursor, PROBE_CREATE)
        try:
            assert run_copy(cursor, copy) == 100 + count
            summed = Statement(sql="SELECT sum(n) FROM atomic_probe", read=first_int)
            assert run(cursor, PROBE_COUNT) == count
            assert run(cursor, summed) == sum(range(101, 101 + count))
        finally:
            run(cursor, PROBE_DROP)
