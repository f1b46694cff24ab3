"""``awa.EnqueueOptions`` and ``Job.using``: one frozen value of enqueue options, taken alike by
``enqueue``, ``enqueue_many`` and ``enqueue_on_commit``, and job copies with other defaults."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test import override_settings

import awa_django as awa
from tests.jobs import record, unique_record
from tests.testing.jobs import greet
from tests.testing.test_run_jobs import runs

pytestmark = pytest.mark.usefixtures("awa_db")


def count_jobs(kind: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.jobs WHERE kind = %s", [kind])
        return cursor.fetchone()[0]


def test_options_are_frozen_and_using_returns_a_changed_copy():
    options = awa.EnqueueOptions(queue="email", priority=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.queue = "default"

    changed = options.using(priority=4, tags=["x"])

    assert (options.queue, options.priority, options.tags) == ("email", 3, None)
    assert (changed.queue, changed.priority, changed.tags) == ("email", 4, ["x"])


def test_one_options_value_serves_every_enqueue_function():
    options = awa.EnqueueOptions(queue="email", priority=3, tags=["batch"], metadata={"k": 1})
    with transaction.atomic():
        one = awa.enqueue(record, args={"n": 1}, options=options)
        many = awa.enqueue_many(record, [{"n": 2}], options=options)
        awa.enqueue_on_commit(record, args={"n": 3}, options=options)

    jobs = awa.list_jobs(kind="tests.record")
    assert {job.job_id for job in jobs} >= {one, *many}
    assert len(jobs) == 3
    for job in jobs:
        assert (job.queue, job.priority, job.tags) == ("email", 3, ["batch"])
        assert job.metadata["k"] == 1


def test_keywords_override_the_options_value():
    job_id = awa.enqueue(
        record, args={"n": 1}, options=awa.EnqueueOptions(queue="email", priority=3), priority=2
    )

    job = awa.get_job(job_id)
    assert (job.queue, job.priority) == ("email", 2)


def test_job_using_is_a_copy_with_other_defaults():
    bulk = record.using(queue="email", priority=4, tags=["bulk"])

    copied = bulk.enqueue(n=1)
    original = record.enqueue(n=2)
    overridden = awa.enqueue(bulk, args={"n": 3}, priority=1)
    batch = bulk.enqueue_many([{"n": 4}])

    assert bulk is not record and bulk.kind == record.kind and bulk.func is record.func
    assert record.queue is None and record.priority is None
    assert (awa.get_job(copied).queue, awa.get_job(copied).priority) == ("email", 4)
    assert awa.get_job(copied).tags == ["bulk"]
    assert (awa.get_job(original).queue, awa.get_job(original).priority) == ("default", 2)
    assert (awa.get_job(overridden).queue, awa.get_job(overridden).priority) == ("email", 1)
    assert awa.get_job(batch[0]).queue == "email"


def test_a_bad_option_given_to_using_is_refused_at_enqueue_naming_it():
    with pytest.raises(awa.InvalidJob) as raised:
        record.using(priority=9).enqueue(n=1)

    assert raised.value.field == "priority"
    assert "priority must be an integer 1..4, got 9" in str(raised.value)
    assert count_jobs("tests.record") == 0


def test_enqueue_on_commit_takes_unique_and_drops_a_duplicate_by_default():
    first = awa.enqueue(record, args={"n": 1}, unique=awa.Unique())
    with transaction.atomic():
        awa.enqueue_on_commit(record, args={"n": 1}, unique=awa.Unique())
        awa.enqueue_on_commit(record, args={"n": 2}, unique=awa.Unique())

    assert count_jobs("tests.record") == 2 and first


def test_enqueue_on_commit_with_on_conflict_raise_raises_from_the_commit():
    unique_record.enqueue(n=1)
    with pytest.raises(awa.UniqueConflict), transaction.atomic():
        awa.enqueue_on_commit(unique_record, args={"n": 1}, on_conflict="raise")

    assert count_jobs("tests.unique_record") == 1


def test_enqueue_on_commit_refuses_a_bad_on_conflict_at_once():
    with pytest.raises(awa.InvalidJob) as raised, transaction.atomic():
        awa.enqueue_on_commit(record, args={"n": 1}, on_conflict="ignore")

    assert raised.value.field == "on_conflict"


def test_enqueue_on_commit_runs_eagerly_when_asked():
    with override_settings(AWA={**settings.AWA, "EAGER": False}):
        with transaction.atomic():
            awa.enqueue_on_commit(greet, args={"name": "now"}, eager=True)
            awa.enqueue_on_commit(greet, args={"name": "later"}, run_at=timedelta(hours=1))

        assert runs() == ["hello now x1 in_atomic=False"]
        assert count_jobs(greet.kind) == 2
