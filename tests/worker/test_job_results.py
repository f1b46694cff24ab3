"""A native handler's return value is kept with its completion, by a worker and in eager mode
alike; a value that cannot be kept fails the attempt for good, and None keeps nothing."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection, transaction
from django.test import override_settings

import awa_django as awa
from awa_django.core.handler_result import MAX_RESULT_BYTES
from tests.conftest import run_burst
from tests.jobs import (
    returns_outcome,
    returns_set,
    returns_too_much,
    returns_value,
    returns_value_async,
)

pytestmark = pytest.mark.usefixtures("awa_db")

VALUE = {"total": 3, "items": [1.5, "two", None, True], "big": 1e20}


def stored_result(job_id: int) -> object:
    """The result column of the job's done row, as the database holds it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT result::text FROM awa.done_entries WHERE job_id = %s", [job_id])
        (text,) = cursor.fetchone()
    return None if text is None else json.loads(text)


@pytest.mark.parametrize("handler", [returns_value, returns_value_async])
def test_a_worker_keeps_what_sync_and_async_handlers_return(handler):
    job_id = handler.enqueue(value=VALUE)
    assert run_burst().claimed == 1
    record = awa.get_job(job_id)
    assert record.state == "completed"
    assert record.result == VALUE and type(record.result["big"]) is float

    dumped = StringIO()
    call_command("awa_jobs", "dump", str(job_id), stdout=dumped)
    assert json.loads(dumped.getvalue())[0]["result"] == VALUE


@pytest.mark.parametrize("handler", [returns_value, returns_value_async])
def test_none_keeps_nothing(handler):
    job_id = handler.enqueue()
    run_burst()
    assert awa.get_job(job_id).state == "completed"
    assert stored_result(job_id) is None


def test_a_returned_outcome_keeps_its_meaning():
    job_id = returns_outcome.enqueue()
    run_burst()
    record = awa.get_job(job_id)
    assert record.state == "cancelled" and record.result is None


@pytest.mark.parametrize(
    ("handler", "problem"),
    [
        (returns_set, "return value is a set, which has no JSON form"),
        (returns_too_much, f"over the {MAX_RESULT_BYTES}-byte cap"),
    ],
)
def test_an_unstorable_value_fails_the_job_at_once_naming_it(handler, problem):
    job_id = handler.enqueue()
    other = returns_value.enqueue(value=[1])
    run_burst()
    record = awa.get_job(job_id)
    assert record.state == "failed" and record.attempt == 1  # not retried: same value again
    (error,) = record.errors
    assert error["type"] == "awa_django.exceptions.InvalidReturnValue"
    assert error["message"].startswith(f"job {job_id} ({handler.kind}): ")
    assert problem in error["message"]
    # Refused in the handler: the rest of the batch completes.
    assert awa.get_job(other).result == [1]


def test_eager_mode_keeps_and_refuses_results_as_a_worker_does():
    with override_settings(AWA={**settings.AWA, "EAGER": True}), transaction.atomic():
        kept = returns_value_async.enqueue(value=VALUE)
        nothing = returns_value.enqueue()
        refused = returns_set.enqueue()
    assert awa.get_job(kept).result == VALUE
    assert awa.get_job(nothing).state == "completed" and stored_result(nothing) is None
    record = awa.get_job(refused)
    assert record.state == "failed" and record.attempt == 1
    assert record.errors[0]["type"] == "awa_django.exceptions.InvalidReturnValue"
