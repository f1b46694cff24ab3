"""Real ``manage.py awa_worker`` processes whose writes fail: a poison completion among many
ends only its own job, and SIGTERM ends the worker within its shutdown timeout even when no
completion can be written at all."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Iterator

import pytest
from django.db import connection

import awa_django as awa
from awa_django import sql
from tests.conftest import wait_until
from tests.jobs import record, sleepy
from tests.misbehaving import MODULES, unstorable_result, unstorable_task

ENV = {
    "AWA_JOB_MODULES": MODULES,
    "AWA_OVERRIDES": json.dumps(
        {"RETRY_BACKOFF_BASE_S": 0.05, "RETRY_JITTER": 0, "PROMOTE_INTERVAL_S": 0.1}
    ),
}
# awa.close_batch failing every call with this SQLSTATE, whatever it is given.
FAILING_CLOSE = """
CREATE OR REPLACE FUNCTION awa.close_batch(p_batch json)
RETURNS TABLE (job_id bigint, run_lease bigint, run_at timestamptz) LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'closing is broken for this test' USING ERRCODE = '{sqlstate}';
END
$$
"""


def run_counts() -> dict[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT job_id, count(*) FROM tests_job_runs WHERE job_id IS NOT NULL GROUP BY 1"
        )
        return dict(cursor.fetchall())


def test_a_poison_completion_among_many_ends_its_own_job_and_sigterm_exits(worker_process):
    worker = worker_process("--queue", "default=4", env=ENV).wait_ready()
    poison = [unstorable_result.enqueue(), int(unstorable_task.enqueue().id)]
    fine = record.enqueue_many([{"n": n} for n in range(20)])
    wait_until(lambda: {j.state for j in awa.get_jobs(fine)} == {"completed"}, timeout=20)
    wait_until(lambda: {j.state for j in awa.get_jobs(poison)} == {"failed"}, timeout=20)
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0
    counts = run_counts()
    assert [counts.get(job_id) for job_id in fine] == [1] * 20
    assert "completion refused by the database" in worker.output
    assert "stale completion" not in worker.output


@pytest.fixture
def broken_close() -> Iterator[Callable[[str], None]]:
    """Breaks awa.close_batch on demand; the real definition is back after the test."""

    def breaks(sqlstate: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(FAILING_CLOSE.format(sqlstate=sqlstate))

    yield breaks
    with connection.cursor() as cursor:
        cursor.execute(sql.functions("close"))


@pytest.mark.parametrize(
    "sqlstate",
    [
        "40001",  # serialization_failure: transient, retried with backoff
        "42501",  # insufficient_privilege: refused whatever the batch holds
    ],
)
def test_sigterm_ends_a_worker_whose_completions_all_fail_within_its_shutdown_timeout(
    worker_process, broken_close, sqlstate
):
    worker = worker_process("--queue", "default=2", "--shutdown-timeout", "2", env=ENV)
    worker.wait_ready()
    broken_close(sqlstate)
    done = record.enqueue(n=1)
    running = sleepy.enqueue(seconds=1.0)
    wait_until(lambda: run_counts().get(done) == 1 and run_counts().get(running) == 1)
    time.sleep(0.5)  # the first completion has failed a few times by now
    worker.proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    assert worker.wait(timeout=30) == 0
    # The shutdown timeout, and room for the interpreter to exit on a loaded CI machine (two
    # suites side by side: 2.3 s alone, 4.5 s once there).
    assert time.monotonic() - signalled < 2 + 5.0, worker.output
    assert "completions not written, their attempts are left to rescue count=2" in worker.output
    # Never written: the attempts stay open, for the leader's rescue to retry.
    assert {j.state for j in awa.get_jobs([done, running])} == {"running"}
