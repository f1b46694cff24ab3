"""The pytest plugin's fixtures (loaded through the package's pytest11 entry point)."""

from __future__ import annotations

from django.db import connection, transaction

import awa_django as awa
from tests.conftest import wait_until
from tests.testing.jobs import flaky, greet
from tests.testing.test_run_jobs import runs


def test_the_plugin_is_loaded_from_the_entry_point(pytestconfig):
    assert pytestconfig.pluginmanager.has_plugin("awa_django")


def test_awa_jobs_inspects_and_runs_in_the_test_transaction(awa_jobs):
    with transaction.atomic():
        job_id = greet.enqueue(name="eve")

    (record,) = awa_jobs.assert_enqueued(greet, args={"name": "eve"}, count=1)
    assert record.job_id == job_id and connection.in_atomic_block
    assert [r.job_id for r in awa_jobs.enqueued()] == [job_id]
    result = awa_jobs.run()
    assert result.completed == 1
    awa_jobs.assert_not_enqueued(greet)


def test_awa_jobs_retries_with_the_clock_and_work_one(awa_jobs):
    job_id = flaky.enqueue()

    assert awa_jobs.run().retried == 1
    assert awa_jobs.advance_clock(3600) == 1
    assert awa_jobs.work_one(job_id).attempt == 2
    assert awa.get_job(job_id).state == "completed"
    assert awa_jobs.make_due() == 0


def test_awa_jobs_commits_under_transactional_db_and_starts_from_an_empty_queue(awa_db, awa_jobs):
    assert awa_jobs.enqueued() == []
    job_id = greet.enqueue(name="fay")

    assert awa_jobs.run(queue="default", kinds=[greet], max_jobs=5).completed == 1
    assert awa.get_job(job_id).state == "completed"
    assert runs() == ["hello fay x1 in_atomic=False"]


def test_awa_worker_runs_committed_jobs_in_a_real_worker(awa_db, awa_worker):
    job_id = greet.enqueue(name="gus")

    wait_until(lambda: awa.get_job(job_id).state == "completed")
    assert awa_worker.runtime is not None and awa_worker.runtime.ready.is_set()
    summary = awa_worker.stop()
    assert summary.claimed >= 1 and summary.abandoned == 0
