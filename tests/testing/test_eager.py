"""Eager mode: a job runs in-process when its enqueueing transaction commits, never before,
never after a rollback; failures retry at once and are reported per AWA['EAGER_RAISE']."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test import TestCase, override_settings

import awa_django as awa
from awa_django.tasks.backend import AwaBackend
from tests.jobs import always_fails, snooze_once
from tests.testing.jobs import flaky, greet
from tests.testing.test_run_jobs import runs

pytestmark = pytest.mark.usefixtures("awa_db")


@pytest.fixture(autouse=True)
def eager() -> Iterator[None]:
    with override_settings(AWA={**settings.AWA, "EAGER": True}):
        yield


def test_commit_runs_the_job_after_the_commit_outside_any_transaction():
    with transaction.atomic():
        job_id = greet.enqueue(name="hal")
        assert runs() == []  # not inside the uncommitted transaction
        assert awa.get_job(job_id).state == "available"

    assert runs() == ["hello hal x1 in_atomic=False"]
    assert awa.get_job(job_id).state == "completed"


def test_rollback_never_runs_the_job():
    with pytest.raises(RuntimeError), transaction.atomic():
        job_id = greet.enqueue(name="ivy")
        raise RuntimeError("the request failed")

    assert runs() == []
    assert awa.get_job(job_id) is None


def test_outside_a_transaction_the_job_runs_at_once():
    job_id = greet.enqueue(name="jo")

    assert awa.get_job(job_id).state == "completed"


def test_failures_retry_at_once_and_are_stored_not_raised_by_default():
    with transaction.atomic():
        recovering = flaky.enqueue(succeed_on=3)
        failing = always_fails.enqueue()

    assert awa.get_job(recovering).state == "completed"
    failed = awa.get_job(failing)
    assert (failed.state, failed.attempt, len(failed.errors)) == ("failed", 3, 3)
    assert failed.errors[-1]["message"] == "boom on attempt 3"


def test_eager_raise_reraises_a_final_failure_from_the_commit():
    with (
        override_settings(AWA={**settings.AWA, "EAGER": True, "EAGER_RAISE": True}),
        pytest.raises(RuntimeError, match="boom on attempt 3"),
        transaction.atomic(),
    ):
        job_id = always_fails.enqueue()

    # Raised after the commit: the job and its history are stored.
    assert awa.get_job(job_id).state == "failed"


def test_eager_raise_ignores_failures_a_retry_recovered_from():
    with override_settings(AWA={**settings.AWA, "EAGER": True, "EAGER_RAISE": True}):
        job_id = flaky.enqueue()

    assert awa.get_job(job_id).state == "completed"


def test_scheduled_and_snoozed_jobs_stay_for_a_worker():
    later = awa.enqueue(greet, args={"name": "kim"}, run_at=timedelta(hours=1))
    snoozed = snooze_once.enqueue()

    assert awa.get_job(later).state == "scheduled"
    assert awa.get_job(snoozed).state == "scheduled"


def test_enqueue_many_and_enqueue_on_commit_run_eagerly():
    with transaction.atomic():
        ids = greet.enqueue_many([{"name": "a"}, {"name": "b"}])
        greet.enqueue_on_commit(name="c")

    assert sorted(runs()) == [f"hello {n} x1 in_atomic=False" for n in "abc"]
    assert {job.state for job in awa.get_jobs(ids)} == {"completed"}


def test_eager_can_be_turned_off_per_call():
    job_id = awa.enqueue(greet, args={"name": "off"}, eager=False)

    assert awa.get_job(job_id).state == "available"


def test_django_tasks_backend_option_runs_tasks_eagerly():
    from tests.tasks.tasks import add

    backends = {
        **settings.TASKS,
        "eager": {
            "BACKEND": "awa_django.tasks.AwaBackend",
            "QUEUES": ["default"],
            "OPTIONS": {"eager": True},
        },
    }
    with override_settings(TASKS=backends, AWA={**settings.AWA, "EAGER": False}):
        task = add.using(backend="eager")
        with transaction.atomic():
            result = task.enqueue(2, 3)
            assert task.get_result(result.id).status == "READY"
            plain = add.enqueue(1, 1)  # the default backend is not eager

        done = task.get_result(result.id)
        assert (done.status, done.return_value) == ("SUCCESSFUL", 5)
        assert add.get_result(plain.id).status == "READY"


def test_invalid_eager_settings_fail_the_checks():
    from awa_django.conf import problems

    with override_settings(AWA={**settings.AWA, "EAGER": "yes", "EAGER_RAISE": 1}):
        found = [(p.id, p.message) for p in problems()]
    assert found == [
        ("awa.E060", "AWA['EAGER'] must be True or False, got 'yes'."),
        ("awa.E060", "AWA['EAGER_RAISE'] must be True or False, got 1."),
    ]
    with pytest.raises(Exception, match="eager"):
        AwaBackend("bad", {"OPTIONS": {"eager": "yes"}})


class EagerInTestCase(TestCase):
    def test_captured_on_commit_callbacks_run_the_job_in_the_test_transaction(self):
        with (
            override_settings(AWA={**settings.AWA, "EAGER": True}),
            self.captureOnCommitCallbacks(execute=True),
        ):
            job_id = greet.enqueue(name="tc")
            assert awa.get_job(job_id).state == "available"

        assert awa.get_job(job_id).state == "completed"
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM tests_job_runs")
            assert cursor.fetchone()[0] == 1
