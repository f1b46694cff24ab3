"""The worker side of ``AwaBackend`` (``awa_django.tasks.runner``): what a running task is told
about its own result, what that costs the database, and where the task signals are sent."""

from __future__ import annotations

import asyncio
import cProfile
import logging
import pstats
import threading
from collections.abc import Iterator

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from awa_django.core.claimed_job import ClaimedJob
from awa_django.declarations.priorities import TASK_KIND_PREFIX
from awa_django.tasks import AwaBackend
from awa_django.tasks import backend as backend_module
from awa_django.tasks import runner as runner_module
from awa_django.tasks.compat import (
    BaseTaskBackend,
    TaskResultStatus,
    task_backends,
    task_finished,
    task_started,
)
from awa_django.testing import make_due, run_jobs
from awa_django.worker.executor import context_for
from tests.conftest import run_burst
from tests.tasks import tasks
from tests.tasks.test_backend import FAST_RETRY

pytestmark = pytest.mark.usefixtures("awa_db", "close_orm_thread_connection")

# The statements that read a job back for its result (awa_django/sql/queries/jobs.sql).
READ_BACK = ("-- Current state of the given jobs", "-- Every claim of the given jobs")


def test_a_first_attempt_is_told_what_get_result_reads_afterwards():
    result = tasks.told.using(priority=7).enqueue(1, [2.5], k="v")
    run_burst()
    fetched = tasks.told.get_result(result.id)
    assert fetched.status == TaskResultStatus.SUCCESSFUL
    assert fetched.return_value == {
        "running": True,
        "enqueued_at": fetched.enqueued_at.isoformat(),
        "started_at": fetched.started_at.isoformat(),
        "last_attempted_at": fetched.last_attempted_at.isoformat(),
        "worker_ids": fetched.worker_ids,
        "errors": [],
        "priority": 7,
        "args": [1, [2.5]],
        "kwargs": {"k": "v"},
        "attempt": 1,
    }
    assert len(fetched.worker_ids) == 1


@override_settings(AWA=FAST_RETRY)
def test_a_retry_is_told_every_claim_and_the_earlier_error():
    result = tasks.told_on_retry.enqueue()
    run_burst(burst_wait_s=5)
    fetched = tasks.told_on_retry.get_result(result.id)
    assert fetched.status == TaskResultStatus.SUCCESSFUL
    told = fetched.return_value
    assert told["attempt"] == 2 and told["running"]
    assert told["worker_ids"] == fetched.worker_ids and len(told["worker_ids"]) == 2
    assert told["started_at"] == fetched.started_at.isoformat()
    assert told["last_attempted_at"] == fetched.last_attempted_at.isoformat()
    assert told["started_at"] < told["last_attempted_at"]
    assert told["errors"] == ["builtins.ConnectionError"]


def _read_backs(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if q["sql"].startswith(READ_BACK)]


def test_a_first_attempt_reads_nothing_back_and_a_retry_reads_its_claims():
    first = tasks.told.enqueue()
    with CaptureQueriesContext(connection) as queries:
        ran = run_jobs()
    assert ran.completed == 1 and len(ran) == 1
    assert _read_backs(queries) == []
    told = tasks.told.get_result(first.id).return_value
    assert told["worker_ids"] == tasks.told.get_result(first.id).worker_ids

    # A job claimed before (here: a retry) has earlier claims to read back.
    retried = tasks.told_on_retry.enqueue()
    run_jobs()
    make_due()
    with CaptureQueriesContext(connection) as queries:
        run_jobs()
    assert len(_read_backs(queries)) == 2
    assert len(tasks.told_on_retry.get_result(retried.id).return_value["worker_ids"]) == 2


@pytest.fixture
def task_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    # Django's logger of the task signals ("django.tasks"), or the backport's.
    for name in ("django.tasks", "django_tasks"):
        caplog.set_level(logging.INFO, logger=name)
    yield caplog


def test_an_async_tasks_log_lines_are_written_where_it_runs(task_log):
    result = tasks.where_async.enqueue()
    run_burst()
    ran_in = tasks.where_async.get_result(result.id).return_value
    # Django's own lines (awa's job line names the job too, as job_id=).
    lines = [
        r
        for r in task_log.records
        if r.name in ("django.tasks", "django_tasks") and f"id={result.id} " in r.getMessage()
    ]
    assert [r.getMessage().rsplit("state=", 1)[1] for r in lines] == ["RUNNING", "SUCCESSFUL"]
    # The framework's own receivers only log: no trip to asgiref's thread and back for them.
    assert {r.thread for r in lines} == {ran_in}


def test_other_sync_receivers_of_an_async_task_run_through_asend():
    seen: list[tuple[str, int, bool]] = []

    def receiver(sender, task_result, **kwargs):
        try:
            asyncio.get_running_loop()
            on_a_loop = True
        except RuntimeError:
            on_a_loop = False
        seen.append((task_result.id, threading.get_ident(), on_a_loop))

    task_started.connect(receiver, weak=False)
    try:
        result = tasks.where_async.enqueue()
        run_burst()
    finally:
        task_started.disconnect(receiver)
    ran_in = tasks.where_async.get_result(result.id).return_value
    # As Django's asend does: a sync receiver runs in asgiref's thread, never on the loop.
    assert [(r_id, on_a_loop) for r_id, _, on_a_loop in seen] == [(result.id, False)]
    assert seen[0][1] != ran_in


def test_the_task_as_enqueued_is_made_once_per_set_of_options():
    backend = task_backends["default"]
    assert isinstance(backend, AwaBackend)
    meta = {"priority": 3, "queue_name": "default", "run_after": None, "backend": "default"}
    made = backend.enqueued_task(tasks.tagged, meta)
    assert made.priority == 3 and made.tags == ("declared",)
    assert backend.enqueued_task(tasks.tagged, dict(meta)) is made
    other = backend.enqueued_task(tasks.tagged, {**meta, "tags": ["x"]})
    assert other.tags == ("x",) and other is not made


def _stored_result_is_sql_null(job_id: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT result IS NULL FROM awa.jobs WHERE job_id = %s", [int(job_id)])
        return bool(cursor.fetchone()[0])


@pytest.mark.parametrize("task", [tasks.returns_nothing, tasks.returns_nothing_async])
def test_a_task_that_returns_nothing_stores_no_result_and_reads_back_none(task):
    result = task.enqueue()
    assert run_jobs().completed == 1
    fetched = task.get_result(result.id)
    assert fetched.status == TaskResultStatus.SUCCESSFUL
    assert fetched.return_value is None
    # Not a stored JSON null: nothing was written for it.
    assert _stored_result_is_sql_null(result.id)
    # A value is stored as before.
    added = tasks.add.enqueue(2, 3)
    run_jobs()
    assert tasks.add.get_result(added.id).return_value == 5
    assert not _stored_result_is_sql_null(added.id)


@pytest.mark.parametrize("task", [tasks.returns_nothing, tasks.returns_nothing_async])
def test_receivers_connected_and_disconnected_between_tasks_are_honoured(task):
    seen: list[tuple[str, str]] = []

    def receiver(signal, sender, task_result, **kwargs):
        seen.append((task_result.id, "started" if signal is task_started else "finished"))

    # The first task runs with the framework's logging receivers only.
    task.enqueue()
    run_jobs()
    task_started.connect(receiver, weak=False)
    task_finished.connect(receiver, weak=False)
    try:
        watched = task.enqueue()
        run_jobs()
    finally:
        task_started.disconnect(receiver)
        task_finished.disconnect(receiver)
    task.enqueue()
    run_jobs()
    assert seen == [(watched.id, "started"), (watched.id, "finished")]


def test_a_change_of_tasks_settings_reaches_the_worker_side():
    # The runner keeps each alias's backend; a TASKS change must not leave it a stale one.
    tasks.returns_nothing.enqueue()
    assert run_jobs().completed == 1
    later = tasks.returns_nothing.enqueue()
    # The framework's own dummy backend (Django's, or the backport's).
    dummy = BaseTaskBackend.__module__.removesuffix(".base") + ".dummy.DummyBackend"
    with override_settings(TASKS={"default": {"BACKEND": dummy}}):
        ran = run_jobs()
    assert ran.failed == 1
    assert "not an AwaBackend" in str(tasks.returns_nothing.get_result(later.id).errors)


@pytest.fixture
def task_log_at_warning(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    # As a worker usually runs: the framework's logger drops INFO lines.
    for name in ("django.tasks", "django_tasks"):
        caplog.set_level(logging.WARNING, logger=name)
    yield caplog


def _framework_lines(caplog: pytest.LogCaptureFixture, result_id: str) -> list[str]:
    return [
        r.getMessage().rsplit("state=", 1)[1]
        for r in caplog.records
        if r.name in ("django.tasks", "django_tasks") and f"id={result_id} " in r.getMessage()
    ]


@pytest.mark.parametrize("task", [tasks.returns_nothing, tasks.returns_nothing_async])
def test_a_task_no_one_hears_makes_no_task_result(task, task_log_at_warning, monkeypatch):
    made: list[str] = []
    assembled = runner_module.assembled_result

    def counting(values, base=None):
        made.append(str(values.get("id", getattr(base, "id", ""))))
        return assembled(values, base)

    monkeypatch.setattr(runner_module, "assembled_result", counting)
    monkeypatch.setattr(backend_module, "assembled_result", counting)
    quiet = task.enqueue()
    assert run_jobs().completed == 1
    # Only the framework's logging receivers, and their logger drops INFO: nothing to make.
    assert made == []
    assert _framework_lines(task_log_at_warning, quiet.id) == []
    # A logger that writes INFO lines gets both, as before.
    for name in ("django.tasks", "django_tasks"):
        task_log_at_warning.set_level(logging.INFO, logger=name)
    heard = task.enqueue()
    assert run_jobs().completed == 1
    assert _framework_lines(task_log_at_warning, heard.id) == ["RUNNING", "SUCCESSFUL"]
    assert made and set(made) == {heard.id}


@pytest.mark.parametrize("task", [tasks.fails_once, tasks.fails_once_async])
def test_a_retry_no_one_hears_reads_nothing_back(task, task_log_at_warning):
    quiet = task.enqueue(f"quiet-{task.name}")
    run_jobs()
    make_due()
    with CaptureQueriesContext(connection) as queries:
        assert run_jobs().completed == 1
    assert _read_backs(queries) == []
    fetched = task.get_result(quiet.id)
    assert fetched.status == TaskResultStatus.SUCCESSFUL and len(fetched.worker_ids) == 2
    # A receiver that listens is told the retry's claims, read back as before.
    seen: list[list[str]] = []

    def receiver(sender, task_result, **kwargs):
        seen.append(list(task_result.worker_ids))

    heard = task.enqueue(f"heard-{task.name}")
    run_jobs()
    make_due()
    task_started.connect(receiver, weak=False)
    try:
        with CaptureQueriesContext(connection) as queries:
            assert run_jobs().completed == 1
    finally:
        task_started.disconnect(receiver)
    assert len(_read_backs(queries)) == 2
    assert seen == [task.get_result(heard.id).worker_ids]


@pytest.mark.parametrize("task", [tasks.always_fails, tasks.fails_once_async])
def test_a_failure_is_logged_when_info_lines_are_not(task, task_log_at_warning):
    # The framework logs a task that ends FAILED at ERROR: still written.
    failed = task.using(max_attempts=1).enqueue(
        *([] if task is tasks.always_fails else ["fails-at-once"])
    )
    assert run_jobs().failed == 1
    assert _framework_lines(task_log_at_warning, failed.id) == ["FAILED"]


def _runner_calls(task) -> int:
    """The Python calls the runner's own functions make to run ``task`` once as a first claim
    (what the task's function does is its own)."""
    handler = runner_module.resolve(f"{TASK_KIND_PREFIX}{task.module_path}")
    assert handler is not None
    now = timezone.now()
    job = ClaimedJob(
        queue="default", priority=2, shard=0, lane_seq=1, ready_slot=0, job_id=1,
        kind=f"{TASK_KIND_PREFIX}{task.module_path}", args={"args": [], "kwargs": {}}, attempt=1,
        run_lease=1, max_attempts=3, run_at=now, created_at=now, metadata={}, tags=[], errors=[],
        claimed_at=now,
    )  # fmt: skip
    ctx = context_for(job, claimed_by="worker-1")
    profile = cProfile.Profile()

    async def run_async() -> None:
        await handler.func(ctx, [], {})  # warms the runner's caches, as a worker's first task
        profile.enable()
        await handler.func(ctx, [], {})
        profile.disable()

    if handler.is_async:
        asyncio.run(run_async())
    else:
        handler.func(ctx, [], {})
        profile.enable()
        handler.func(ctx, [], {})
        profile.disable()
    return sum(
        ncalls
        for _, (_, _, _, _, callers) in pstats.Stats(profile).stats.items()  # type: ignore[attr-defined]
        for (path, _, _), (_, ncalls, _, _) in callers.items()
        if path.endswith("tasks/runner.py")
    )


# What the runner calls around a task no one hears, sync or async: 12 (15 before #32's per-job
# cuts: a success's signal was checked through two more functions, and the function of a task
# that takes no context was called through one).
MAX_RUNNER_CALLS = 12


@pytest.mark.parametrize("task", [tasks.returns_nothing, tasks.returns_nothing_async])
def test_a_task_no_one_hears_costs_the_runner_a_bounded_number_of_calls(task, task_log_at_warning):
    assert 0 < _runner_calls(task) <= MAX_RUNNER_CALLS
