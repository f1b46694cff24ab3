"""The worker's pool decodes claimed jsonb columns with its own loader; values must come out as
psycopg's would, with no object shared between jobs."""

from __future__ import annotations

import asyncio
import cProfile
import json
import pstats
from datetime import UTC

import pytest
from psycopg import conninfo

import awa_django as awa
from awa_django.core.claimed_job import ClaimedJob, claimed_job_rows
from awa_django.storage.connections import ClaimJsonbLoader, connection_kwargs, open_pool
from awa_django.storage.queue import ClaimRequest, claim_ready
from awa_django.storage.statement import Statement, all_rows, run_async
from tests.jobs import typed

pytestmark = pytest.mark.usefixtures("awa_db")


async def claim_all(database: str = "default") -> tuple[list[ClaimedJob], object, str | None]:
    """Claim every ready job of the default queue through a worker pool on ``database`` (an
    alias or a DSN); also returns the pool's jsonb loader and its session time zone."""
    pool = await open_pool(database, max_size=2)
    try:
        async with pool.connection() as conn:
            loader = conn.adapters.get_loader(conn.adapters.types["jsonb"].oid, 0)
            zone = conn.info.parameter_status("TimeZone")
            jobs = await run_async(
                conn,
                claim_ready(
                    ClaimRequest(
                        queue="default", claimed_by="decoding-test", deadline_s=0, aging_s=0
                    ),
                    rows=claimed_job_rows,
                    limit=10,
                ),
            )
    finally:
        await pool.close()
    return jobs, loader, zone


def test_claimed_json_columns_decode_exactly_and_are_not_shared() -> None:
    typed.enqueue(user_id=1, email="ünï@example.com", tags=["a", "ß"])
    typed.enqueue(user_id=2, email="b@example.com", tags=[])
    awa.enqueue(typed, args={"user_id": 3, "email": "c@example.com"}, metadata={"tenant": "t1"})
    jobs, loader, _ = asyncio.run(claim_all())
    assert loader is ClaimJsonbLoader
    assert [job.args for job in sorted(jobs, key=lambda j: j.args["user_id"])] == [
        {"user_id": 1, "email": "ünï@example.com", "tags": ["a", "ß"]},
        {"user_id": 2, "email": "b@example.com", "tags": []},
        {"user_id": 3, "email": "c@example.com"},
    ]
    by_user = {job.args["user_id"]: job for job in jobs}
    assert by_user[1].metadata == {} and by_user[3].metadata == {"tenant": "t1"}
    assert all(job.errors == [] for job in jobs)
    # A handler that changes its context's dicts must not change another job's.
    assert by_user[1].metadata is not by_user[2].metadata
    assert by_user[1].errors is not by_user[2].errors
    by_user[1].metadata["seen"] = True
    assert by_user[2].metadata == {}


async def claim_with_other_columns() -> None:
    pool = await open_pool("default", max_size=1)
    try:
        async with pool.connection() as conn:
            await run_async(
                conn,
                Statement(
                    sql="SELECT 1 AS job_id, 'k' AS kind", read=all_rows, rows=claimed_job_rows
                ),
            )
    finally:
        await pool.close()


def test_claimed_rows_must_come_in_the_claims_column_order() -> None:
    # Rows are built from their values by position, so a statement out of step with
    # ClaimedJob fails on its first result instead of filling fields with the wrong values.
    with pytest.raises(ValueError, match="a statement returning attempts gave the columns"):
        asyncio.run(claim_with_other_columns())


def test_claimed_timestamps_come_back_in_python_utc_whatever_the_session_zone() -> None:
    typed.enqueue(user_id=1, email="a@example.com")
    # A worker DSN asking for another zone: the worker's connections still run in UTC.
    dsn = connection_kwargs("default")
    dsn_text = conninfo.make_conninfo(**{**dsn, "options": "-c TimeZone=America/Santiago"})
    (job,), _, zone = asyncio.run(claim_all(dsn_text))
    assert zone == "UTC"
    assert job.run_at.tzinfo is UTC
    assert job.created_at.tzinfo is UTC


def test_the_claim_loader_reads_jsonb_text_as_json_loads_does() -> None:
    # The loader reads the server's jsonb text with the JSON scanner alone: every value must come
    # out as the full parser's would, and text that is not one value from its first character
    # to its last (never the server's output) goes to that parser, whitespace and errors alike.
    loader = ClaimJsonbLoader(0)
    texts = [
        '{"n": 1, "payload": "000"}',
        '{"a": [1, 2.5, -3e+20, 12345678901234567890, null, true, false], "b": {"c": {}}}',
        '["\\u00e9\\ud83d\\ude00", "tab\\there", 0.1]',
        '"text"',
        "17",
        ' {"padded": true} ',
    ]
    for text in texts:
        assert loader.load(text.encode()) == json.loads(text), text
    for bad in ('{"a": 1} {"b": 2}', '{"a": ', ""):
        with pytest.raises(json.JSONDecodeError):
            loader.load(bad.encode())


def test_the_claim_loader_reads_a_job_s_arguments_in_one_python_call() -> None:
    # Three jsonb columns a claimed job: json.loads and its decoder's methods were about ten
    # Python calls for each non-empty one; the scanner is C, so what is left is the loader's
    # own call (and a builtin's).
    loader = ClaimJsonbLoader(0)
    values = [json.dumps({"n": n, "payload": "0" * 240}).encode() for n in range(100)]
    profile = cProfile.Profile()
    profile.enable()
    for value in values:
        loader.load(value)
    profile.disable()
    python_calls = sum(
        entry[1]
        for (path, _, _), entry in pstats.Stats(profile).stats.items()  # type: ignore[attr-defined]
        if path != "~"
    )
    assert python_calls == len(values), python_calls
