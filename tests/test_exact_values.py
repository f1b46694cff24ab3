"""Every value a caller passes comes back exactly, read with awa.get_job and as the handler
receives it, or is refused with InvalidJob before any SQL is sent, leaving the caller's
transaction usable. The rules themselves: awa_django/declarations/exact_json.py,
tests/unit/test_exact_json.py; the same properties over generated values:
tests/test_boundary_properties.py."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction

import awa_django as awa
from awa_django.core.claimed_job import claimed_job_rows
from awa_django.storage.browse import job_progress
from awa_django.storage.connections import connect
from awa_django.storage.execution import LiveAttempt, heartbeat_attempts
from awa_django.storage.queue import ClaimRequest, claim_ready
from awa_django.storage.statement import run, run_async
from tests.conftest import run_burst
from tests.jobs import (
    checkpoint_echo,
    echo,
    exact_repr,
    noop,
    record,
    typed,
)

pytestmark = pytest.mark.usefixtures("awa_db")

# Each would come back as something else through jsonb, or did before it was written out.
FLOATS: dict[str, Any] = {
    "e16": 1e16,
    "e308": 1e308,
    "negative": -1.5e20,
    "subnormal": 5e-324,
    "small": 1e-7,
    "whole": 3.0,
    "int": 10**16,
    "nested": [1e17, {"deeper": 2.5e30}],
}


def handled(job_id: int) -> str:
    """What the echo handler recorded for the job."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT note FROM tests_job_runs WHERE job_id = %s", [job_id])
        (note,) = cursor.fetchone()
    return note


def received(args: dict[str, Any], metadata: dict[str, Any] | None = None) -> str:
    return exact_repr({"args": args, "metadata": metadata or {}, "tags": []})


@pytest.mark.parametrize(
    "enqueue",
    [
        lambda args, metadata: awa.enqueue(echo, args=args, metadata=metadata),
        lambda args, metadata: awa.enqueue_many(echo, [args], metadata=metadata)[0],
    ],
    ids=["enqueue", "enqueue_many"],
)
def test_floats_keep_their_value_and_type_through_storage_and_the_handler(enqueue):
    job_id = enqueue(FLOATS, {"m": 1e16})
    job = awa.get_job(job_id)
    assert exact_repr(job.args) == exact_repr(FLOATS)
    assert exact_repr(job.metadata) == exact_repr({"m": 1e16})
    run_burst()
    assert handled(job_id) == received(FLOATS, {"m": 1e16})


@pytest.mark.parametrize(
    "enqueue",
    [
        lambda run_at: awa.enqueue(echo, args=FLOATS, run_at=run_at),
        lambda run_at: awa.enqueue_many(echo, [FLOATS], run_at=run_at)[0],
    ],
    ids=["enqueue", "enqueue_many"],
)
def test_floats_of_scheduled_jobs_keep_their_value_and_type(enqueue):
    job = awa.get_job(enqueue(timedelta(hours=1)))
    assert job.state == "scheduled"
    assert exact_repr(job.args) == exact_repr(FLOATS)


DEEP: list[Any] = []
_inner = DEEP
for _ in range(10_000):
    _inner.append([])
    _inner = _inner[0]


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: echo.enqueue(name="lone \ud800 surrogate"), "args.name"),
        (lambda: awa.enqueue(echo, metadata={"m": ["\udc00"]}), "metadata.m[0]"),
        (lambda: awa.enqueue(echo, tags=["ok", "nul\x00"]), "tags[1]"),
        (lambda: awa.enqueue(echo, tags=["\ud800"]), "tags[0]"),
        (lambda: awa.enqueue(echo, ordering_key="key\x00"), "ordering_key"),
        (lambda: awa.enqueue(echo, ordering_key="\udfff"), "ordering_key"),
        (lambda: awa.enqueue("tests.nowhere\x00", args={}), "kind"),
        (lambda: echo.enqueue(deep=DEEP), "args.deep" + "[0]" * 99),
        (lambda: echo.enqueue(zero=-0.0), "args.zero"),
        (lambda: echo.enqueue(pair=(1, 2)), "args.pair"),
        (lambda: awa.enqueue(echo, tags="urgent"), "tags"),
        (
            lambda: awa.enqueue_many(echo, [{"n": 1}, {"n": 2}, {"s": "\ud800"}]),
            "args_list[2].s",
        ),
        (
            lambda: awa.enqueue_many(echo, [{"n": 1}], run_at=timedelta(hours=1), tags=["\x00"]),
            "tags[0]",
        ),
        (lambda: echo.enqueue_on_commit(name="\ud800"), "args.name"),
        (lambda: awa.enqueue(echo, run_at=timedelta(days=10**8)), "run_at"),
    ],
)
def test_refused_values_raise_invalid_job_and_the_transaction_carries_on(call, field):
    with transaction.atomic():
        kept = record.enqueue(n=1)
        with pytest.raises(awa.InvalidJob) as refused:
            call()
        # A statement the server refused would have aborted the transaction: these would fail.
        after = record.enqueue(n=2)
    assert refused.value.field == field
    assert [job.job_id for job in awa.get_jobs([kept, after])] == [kept, after]
    assert len(awa.list_jobs(kind="tests.echo")) == 0


def test_a_checkpoint_keeps_its_floats_for_the_next_attempt():
    checkpoint = {"big": 1e16, "values": [2.5e20, 0.5]}
    job_id = checkpoint_echo.enqueue(checkpoint=checkpoint)
    run_burst(burst_wait_s=5)
    assert awa.get_job(job_id).state == "completed"
    assert handled(job_id) == exact_repr(checkpoint)


def test_a_heartbeat_saves_a_checkpoint_with_its_floats():
    job_id = noop.enqueue()

    async def beat() -> None:
        async with await connect("default") as conn:
            (job,) = await run_async(
                conn,
                claim_ready(
                    ClaimRequest(queue="default", claimed_by="w", deadline_s=0, aging_s=0),
                    rows=claimed_job_rows,
                    limit=1,
                ),
            )
            live = LiveAttempt.of(job, progress={"percent": 1, "message": ""}, checkpoint=saved)
            assert await run_async(conn, heartbeat_attempts([live], claimed_by="w")) == {
                (job_id, 1)
            }

    saved = {"big": 1e16}
    asyncio.run(beat())
    with connection.cursor() as cursor:
        progress = run(cursor, job_progress(job_id))
    assert progress is not None and exact_repr(progress.checkpoint) == exact_repr(saved)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: typed.enqueue(user_id="x", email="a"), "args.user_id"),
        (lambda: typed.enqueue(user_id=1), "args.email"),
        (lambda: typed.enqueue(user_id=1, email="a", colour="red"), "args.colour"),
        (lambda: awa.enqueue(echo, args={1: "x"}), "args"),
        (lambda: awa.enqueue(typed, args={"user_id": 1, "email": "a", 2: "x"}), "args"),
        (lambda: awa.enqueue(echo, args={"a-b": {"c": -0.0}}), "args['a-b'].c"),
        (lambda: awa.enqueue(echo, args=["x"]), "args"),
        (
            lambda: typed.enqueue_many([{"user_id": 1, "email": "a"}, {"user_id": 2}]),
            "args_list[1].email",
        ),
        (lambda: awa.enqueue_many(echo, [{"n": 1}, ["not a dict"]]), "args_list[1]"),
        (lambda: awa.enqueue_many(echo, "not a list"), "args_list"),
    ],
)
def test_field_is_the_path_of_the_value_as_the_caller_passed_it(
    call: Callable[[], object], field: str
):
    with pytest.raises(awa.InvalidJob) as refused:
        call()
    assert refused.value.field == field
    assert str(refused.value).startswith(field)
