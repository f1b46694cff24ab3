"""Workflows against real worker processes: a fan-in whose dependencies complete at the same
instant in different workers runs exactly once, results reach the callback, cancel reaches a
running step, and the steps are released without any polling (the callback starts within
moments of its last dependency)."""

from __future__ import annotations

import time

from django.db import connection

import awa_django as awa
from tests.workflows.jobs import collect, sleep, wait_cancel

WORKER_ENV = {"AWA_JOB_MODULES": "tests.jobs,tests.workflows.jobs"}


def runs(note: str) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT job_id FROM tests_job_runs WHERE note = %s", [note])
        return [job_id for (job_id,) in cursor.fetchall()]


def test_a_fan_in_completed_at_once_in_several_workers_runs_exactly_once(worker_process):
    workers = [worker_process(env=WORKER_ENV) for _ in range(3)]
    for worker in workers:
        worker.wait_ready()
    # Many chords whose members all finish at the same wall-clock instant, claimed by
    # whichever worker is free: their completions race to release each callback.
    until = time.time() + 3.0
    runs_ = [
        awa.chord([awa.call(sleep, until=until) for _ in range(6)], awa.call(collect)).enqueue()
        for _ in range(10)
    ]
    for run in runs_:
        state = awa.wait_workflow(run.workflow_id, timeout=60)
        assert state.state == "completed", state
        members = [state.step(str(n)).result for n in range(1, 7)]
        assert state.step("callback").result == members
    callbacks = runs("callback")
    assert sorted(callbacks) == sorted(run.job_ids["callback"] for run in runs_)
    # No member ran twice either.
    assert len(runs("1")) == 10 and len(runs("6")) == 10
    for worker in workers:
        worker.kill()


def test_cancel_workflow_reaches_a_running_step(worker_process):
    worker_process(env=WORKER_ENV).wait_ready()
    run = (
        awa.Workflow()
        .step("long", wait_cancel, args={"limit_s": 30})
        .step("after", collect, after=["long"])
        .enqueue()
    )
    deadline = time.monotonic() + 30
    while not runs("long:started"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert awa.cancel_workflow(run.workflow_id, reason="stop") == 2
    state = awa.wait_workflow(run.workflow_id, timeout=30)
    assert state.state == "cancelled"
    assert [s.state for s in state.steps] == ["cancelled", "cancelled"]
    deadline = time.monotonic() + 30
    while not runs("long:saw cancel"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert runs("after") == []


def test_a_callback_starts_right_after_its_last_dependency(worker_process):
    worker_process(env=WORKER_ENV).wait_ready()
    run = awa.chain(awa.call(sleep), awa.call(sleep), awa.call(sleep)).enqueue()
    state = awa.wait_workflow(run.workflow_id, timeout=30)
    assert state.state == "completed"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT max(c.claimed_at - p.finished_at) FROM awa.workflow_steps s "
            "JOIN awa.workflow_steps p ON p.workflow_id = s.workflow_id "
            "AND p.name = s.after[1] JOIN awa.claim_receipts c ON c.job_id = s.job_id "
            "WHERE s.workflow_id = %s",
            [run.workflow_id],
        )
        (gap,) = cursor.fetchone()
    # Released by the completion's own transaction and claimed on its commit's wake-up: far
    # under the promoter's interval, which would otherwise set the pace.
    assert gap.total_seconds() < 0.5, gap


def test_cancel_racing_the_completions_of_its_steps_always_ends_the_workflow(worker_process):
    workers = [worker_process(env=WORKER_ENV) for _ in range(2)]
    for worker in workers:
        worker.wait_ready()
    for _ in range(5):
        until = time.time() + 1.0
        run = awa.chord([awa.call(sleep, until=until) for _ in range(12)], awa.call(collect))
        started = run.enqueue()
        time.sleep(max(0.0, until - time.time()))
        # Cancels while the members close: some close first, the rest are cancelled.
        cancelled = awa.cancel_workflow(started.workflow_id, reason="race")
        state = awa.wait_workflow(started.workflow_id, timeout=30)
        assert state.state in {"cancelled", "completed"}, state
        if cancelled is not None:
            assert state.state == "cancelled"
            assert set(state.counts) <= {"completed", "cancelled"}
            members = [step.state for step in state.steps if step.name != "callback"]
            if all(member == "completed" for member in members):
                # Every member closed before the cancel landed: the callback was released and
                # may have run to its end (it sees ctx.is_cancelled(), and collect ignores it).
                assert state.step("callback").state in {"completed", "cancelled"}
            else:
                assert state.step("callback").state == "cancelled"


def test_a_fan_out_sized_at_run_time_runs_in_workers(worker_process):
    from tests.workflows.jobs import split

    for _ in range(2):
        worker_process(env=WORKER_ENV).wait_ready()
    run = (
        awa.Workflow("fan")
        .step("split", split, args={"parts": 20})
        .step("combine", collect, after=["split"])
        .enqueue()
    )
    state = awa.wait_workflow(run.workflow_id, timeout=60)
    assert state.state == "completed", state
    assert state.step("combine").result == [0, *(n * 10 for n in range(1, 21))]
    assert len(runs("combine")) == 1
