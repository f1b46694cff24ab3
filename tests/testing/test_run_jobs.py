"""awa_django.testing inside Django's TestCase: jobs enqueued in the test transaction are seen
and run there through the worker's claim and close path, with the worker's outcomes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.test import TestCase, TransactionTestCase, override_settings

import awa_django as awa
from awa_django import signals
from awa_django.core.outcome import Outcome
from awa_django.exceptions import InvalidJob
from awa_django.testing import (
    advance_clock,
    assert_enqueued,
    assert_not_enqueued,
    enqueued_jobs,
    make_due,
    perform,
    reset_queue,
    run_jobs,
    work_one,
)
from tests.jobs import always_fails, cancels, noop, snooze_once
from tests.testing.jobs import broken_sql, cancels_itself, flaky, greet, greet_async


def runs() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT note FROM tests_job_runs ORDER BY id")
        return [note for (note,) in cursor.fetchall()]


class RunJobsInTestCase(TestCase):
    def test_enqueued_in_the_test_transaction_then_run_there(self):
        job_id = greet.enqueue(name="ann")

        (record,) = assert_enqueued(greet, args={"name": "ann"}, queue="default", count=1)
        assert record.job_id == job_id
        result = run_jobs()

        assert (result.completed, result.retried, result.failed, len(result)) == (1, 0, 0, 1)
        assert result.jobs[0].job_id == job_id and result.jobs[0].closed
        assert awa.get_job(job_id).state == "completed"
        assert runs() == ["hello ann x1 in_atomic=True"]
        assert_not_enqueued(greet)

    def test_async_handlers_run_on_the_test_connection(self):
        greet_async.enqueue(name="bo")

        assert run_jobs().completed == 1
        assert runs() == ["async hello bo"]

    def test_a_retry_waits_for_its_backoff_until_the_clock_moves(self):
        job_id = flaky.enqueue(succeed_on=3)

        first = run_jobs()
        assert (first.retried, first.jobs[0].outcome) == (1, Outcome.RETRYABLE)
        assert isinstance(first.jobs[0].error, ConnectionError)
        assert len(run_jobs()) == 0  # not due yet: nothing sleeps, nothing runs
        assert_enqueued(flaky, count=1)

        assert advance_clock(timedelta(hours=1)) == 1
        assert run_jobs().retried == 1
        assert make_due() == 1
        assert run_jobs().completed == 1
        job = awa.get_job(job_id)
        assert (job.state, job.attempt, len(job.errors)) == ("completed", 3, 2)

    def test_advance_clock_moves_only_what_falls_due(self):
        soon = awa.enqueue(greet, args={"name": "soon"}, run_at=timedelta(minutes=5))
        late = awa.enqueue(greet, args={"name": "late"}, run_at=timedelta(hours=5))

        advance_clock(6 * 60)
        result = run_jobs()

        assert [job.job_id for job in result.jobs] == [soon]
        assert awa.get_job(late).state == "scheduled"

    def test_failures_snoozes_cancels_and_unknown_kinds_close_as_a_worker_would(self):
        failing = awa.enqueue(always_fails, args={}, max_attempts=1)
        snoozing = snooze_once.enqueue()
        cancelled = cancels.enqueue()
        with override_settings(AWA={**settings.AWA, "EXTERNAL_KINDS": ["dx.*"]}):
            unknown = awa.enqueue("dx.no_such_kind", args={}, max_attempts=1)

        result = run_jobs()

        assert (result.failed, result.snoozed, result.cancelled) == (1, 2, 1)
        jobs = [failing, snoozing, cancelled, unknown]
        states = {job.job_id: job.state for job in awa.get_jobs(jobs)}
        assert states == {
            failing: "failed",
            snoozing: "scheduled",
            cancelled: "cancelled",
            # It waits for a worker that knows its kind, its one attempt unused.
            unknown: "retryable",
        }
        assert awa.get_job(unknown).errors[0]["type"].endswith("UnknownJobKind")
        assert awa.get_job(unknown).attempt == 0
        advance_clock(1)
        assert run_jobs().completed == 1

    def test_a_database_error_in_a_handler_leaves_the_test_transaction_usable(self):
        job_id = broken_sql.enqueue()

        assert run_jobs().retried == 1

        # The handler's writes rolled back to a savepoint; the transaction goes on.
        assert runs() == []
        assert awa.get_job(job_id).state == "retryable"

    def test_kinds_work_a_queue_in_order_and_never_skip(self):
        first = greet.enqueue(name="a")
        second = noop.enqueue()

        assert len(run_jobs(kinds=[noop])) == 0  # greet is ahead of it
        assert [j.job_id for j in run_jobs(kinds=["dx.greet"]).jobs] == [first]
        assert [j.job_id for j in run_jobs(kinds=[noop]).jobs] == [second]

    def test_max_jobs_caps_the_run(self):
        ids = greet.enqueue_many([{"name": str(n)} for n in range(5)])

        assert [j.job_id for j in run_jobs(max_jobs=2).jobs] == ids[:2]
        assert len(enqueued_jobs(greet)) == 3
        assert len(run_jobs(queue="email")) == 0
        assert run_jobs(queue="default").completed == 3

    def test_work_one_runs_the_head_of_its_queue_and_refuses_others(self):
        first = greet.enqueue(name="first")
        second = greet.enqueue(name="second")
        scheduled = awa.enqueue(noop, args={}, queue="email", run_at=timedelta(days=1))

        with pytest.raises(AssertionError, match=f"job {first} is ahead"):
            work_one(second)
        assert work_one(first).outcome is Outcome.COMPLETED
        assert work_one(scheduled).outcome is Outcome.COMPLETED
        with pytest.raises(AssertionError, match="not waiting"):
            work_one(scheduled)

    def test_retried_signal_is_sent_for_in_process_runs(self):
        seen = []

        def receiver(sender, **kwargs):
            seen.append((kwargs["job_id"], kwargs["attempt"]))

        signals.job_retried.connect(receiver)
        try:
            job_id = flaky.enqueue()
            run_jobs()
        finally:
            signals.job_retried.disconnect(receiver)
        assert seen == [(job_id, 1)]

    def test_a_completion_after_someone_else_closed_the_attempt_is_stale(self):
        job_id = cancels_itself.enqueue()

        (ran,) = run_jobs().jobs

        assert (ran.outcome, ran.closed) == (Outcome.COMPLETED, False)
        assert awa.get_job(job_id).state == "cancelled"

    def test_a_queue_with_a_dead_letter_queue_routes_terminal_failures_there(self):
        queues = {"default": {"dlq": True}, "email": {}}
        with override_settings(AWA={**settings.AWA, "QUEUES": queues}):
            job_id = awa.enqueue(always_fails, args={}, max_attempts=1)

            assert run_jobs().failed == 1

        assert awa.get_job(job_id).state == "dlq"


class RunJobsInTransactionTestCase(TransactionTestCase):
    def tearDown(self):
        reset_queue()
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE tests_job_runs")

    def test_runs_commit_like_a_worker(self):
        job_id = flaky.enqueue()

        assert run_jobs().retried == 1
        assert not connection.in_atomic_block
        make_due([job_id])
        assert run_jobs().completed == 1
        assert runs() == ["flaky attempt 1", "flaky attempt 2"]
        assert_not_enqueued()


class AssertionsInTestCase(TestCase):
    def test_assert_enqueued_reports_what_is_waiting(self):
        greet.enqueue(name="ann")
        greet.enqueue(name="ann", times=2)

        assert len(assert_enqueued(greet, args={"name": "ann"})) == 2
        assert_enqueued("dx.greet", args={"times": 2}, count=1)
        with pytest.raises(AssertionError, match=r"expected 3 dx.greet.*found 2.*ann"):
            assert_enqueued(greet, count=3)
        with pytest.raises(AssertionError, match="on queue 'email', found 0"):
            assert_enqueued(greet, queue="email")
        with pytest.raises(AssertionError, match=r"dx\.greet"):
            assert_not_enqueued(greet, args={"name": "ann"})
        assert_not_enqueued(greet, args={"name": "bob"})
        assert_not_enqueued(noop)


@pytest.mark.django_db
def test_perform_calls_the_handler_with_a_real_context():
    assert perform(greet, name="cy", times=2) == "hello cy"
    assert perform(greet_async, name="di") == "async hello di"


def test_perform_validates_arguments_like_enqueue():
    with pytest.raises(InvalidJob, match="name"):
        perform(greet, name=3)  # type: ignore[arg-type]
