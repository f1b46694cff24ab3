"""Django's own ``@task`` code on ``AwaBackend``: transactional enqueue, the awa worker running
tasks by module path, results read back with ``get_result``/``refresh`` and the standard signals."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import awa_django as awa
from awa_django.conf import get_settings
from awa_django.declarations.priorities import TASK_METADATA_KEY
from awa_django.tasks import AwaBackend, AwaTask
from awa_django.tasks.compat import (
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
    task_enqueued,
    task_finished,
    task_started,
)
from tests.conftest import BackgroundWorker, close_this_threads_connection, run_burst, wait_until
from tests.jobs import exact_repr
from tests.tasks import tasks

pytestmark = pytest.mark.usefixtures("awa_db", "close_orm_thread_connection")

FAST_RETRY = {
    "QUEUES": {"default": {"concurrency": 1}, "email": {"concurrency": 1}},
    "RETRY_BACKOFF_BASE_S": 0.02,
    "RETRY_JITTER": 0,
    "POLL_INTERVAL_S": 0.1,
    "PROMOTE_INTERVAL_S": 0.05,
}


def notes() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT note FROM tests_job_runs ORDER BY id")
        return [row[0] for row in cursor.fetchall()]


@pytest.fixture
def received() -> Iterator[list[tuple[str, type, str, TaskResultStatus]]]:
    """Every django.tasks signal sent, as (signal, sender, result id, status)."""
    log: list[tuple[str, type, str, TaskResultStatus]] = []
    receivers = {}
    for name, signal in (
        ("enqueued", task_enqueued),
        ("started", task_started),
        ("finished", task_finished),
    ):

        def receiver(sender, task_result, _name=name, **kwargs):
            log.append((_name, sender, task_result.id, task_result.status))

        receivers[name] = receiver
        signal.connect(receiver, weak=False)
    yield log
    task_enqueued.disconnect(receivers["enqueued"])
    task_started.disconnect(receivers["started"])
    task_finished.disconnect(receivers["finished"])


def test_the_configured_backend_is_awa_with_every_feature():
    backend = task_backends["default"]
    assert isinstance(backend, AwaBackend)
    assert backend.supports_defer and backend.supports_async_task
    assert backend.supports_get_result and backend.supports_priority


def test_committed_tasks_run_and_results_read_back():
    with transaction.atomic():
        added = tasks.add.enqueue(2, b=3)
        shouted = tasks.shout.enqueue("hi")
        contextual = tasks.with_context.enqueue(label="one")
    assert added.status == TaskResultStatus.READY and len(added.id) <= 64
    assert tasks.add.get_result(added.id).status == TaskResultStatus.READY

    run_burst()

    added.refresh()
    assert added.status == TaskResultStatus.SUCCESSFUL and added.return_value == 5
    assert added.args == [2] and added.kwargs == {"b": 3}
    assert added.attempts == 1 and added.errors == []
    assert added.enqueued_at <= added.started_at <= added.finished_at
    assert added.last_attempted_at == added.started_at
    assert tasks.shout.get_result(shouted.id).return_value == "HI"
    assert awa.get_job(int(shouted.id)).queue == "email"
    context_result = tasks.with_context.get_result(contextual.id)
    assert context_result.return_value == {"attempt": 1, "id": contextual.id, "workers": 1}
    assert sorted(notes()) == ["add 2 3", "context one", "shout hi"]


def test_rolled_back_enqueue_never_runs_and_sends_nothing(received):
    with pytest.raises(RuntimeError), transaction.atomic():
        result = tasks.add.enqueue(1, 1)
        raise RuntimeError("business failure")
    run_burst()
    assert notes() == []
    assert received == []
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(result.id)


def test_signals_in_order_and_enqueued_only_after_commit(received):
    with transaction.atomic():
        result = tasks.add.enqueue(1, 2)
        assert received == []
    assert received == [("enqueued", AwaBackend, result.id, TaskResultStatus.READY)]
    run_burst()
    assert received == [
        ("enqueued", AwaBackend, result.id, TaskResultStatus.READY),
        ("started", AwaBackend, result.id, TaskResultStatus.RUNNING),
        ("finished", AwaBackend, result.id, TaskResultStatus.SUCCESSFUL),
    ]


def test_async_enqueue_and_get_result(received):
    async def main() -> tuple[str, TaskResultStatus]:
        result = await tasks.shout.aenqueue("async")
        fetched = await tasks.shout.aget_result(result.id)
        await sync_to_async(close_this_threads_connection)()
        return result.id, fetched.status

    result_id, status = asyncio.run(main())
    assert status == TaskResultStatus.READY
    assert received == [("enqueued", AwaBackend, result_id, TaskResultStatus.READY)]
    run_burst()
    assert tasks.shout.get_result(result_id).return_value == "ASYNC"
    assert [name for name, *_ in received] == ["enqueued", "started", "finished"]


def test_priority_orders_work_and_is_kept_on_the_result():
    lazy = tasks.lazy.enqueue(label="first enqueued")
    plain = tasks.add.enqueue(0, 0)
    urgent = tasks.urgent.enqueue(label="last enqueued")
    assert [awa.get_job(int(r.id)).priority for r in (urgent, plain, lazy)] == [-48, 2, 102]
    run_burst(queues={"default": 1})
    assert notes() == ["urgent last enqueued", "add 0 0", "lazy first enqueued"]
    assert tasks.urgent.get_result(urgent.id).task.priority == 50


@pytest.mark.parametrize("delay", [timedelta(hours=1), "datetime"])
def test_run_after_defers_the_task(delay):
    run_after = timezone.now() + timedelta(hours=1) if delay == "datetime" else delay
    result = tasks.add.using(run_after=run_after).enqueue(1, 1)
    assert awa.get_job(int(result.id)).state == "scheduled"
    run_burst()
    fetched = tasks.add.get_result(result.id)
    assert fetched.status == TaskResultStatus.READY and notes() == []
    assert fetched.task.run_after > timezone.now() + timedelta(minutes=59)


@override_settings(AWA=FAST_RETRY)
def test_retry_then_success_reads_as_ready_then_successful(received):
    result = tasks.flaky.enqueue()
    run_burst(burst_wait_s=5)
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == "recovered"
    assert notes() == ["flaky 1", "flaky 2"]
    assert result.attempts == 2 and len(result.worker_ids) == 2
    assert [e.exception_class_path for e in result.errors] == ["builtins.ConnectionError"]
    assert "first attempt fails" in result.errors[0].traceback
    assert result.errors[0].exception_class is ConnectionError
    assert result.started_at < result.last_attempted_at
    finished = [status for name, _, _, status in received if name == "finished"]
    assert finished == [TaskResultStatus.READY, TaskResultStatus.SUCCESSFUL]


@override_settings(AWA=FAST_RETRY)
def test_a_task_that_raises_fails_at_once_as_with_djangos_own_backends(received):
    result = tasks.always_fails.enqueue()
    run_burst(burst_wait_s=1)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.attempts == 1
    assert [e.exception_class_path for e in result.errors] == ["builtins.ValueError"]
    assert [status for name, _, _, status in received if name == "finished"] == [
        TaskResultStatus.FAILED
    ]


@override_settings(
    AWA=FAST_RETRY,
    TASKS={
        "default": {
            "BACKEND": "awa_django.tasks.AwaBackend",
            "QUEUES": ["default", "email"],
            "OPTIONS": {"max_attempts": 2, "tags": ["django-task"]},
        }
    },
)
def test_exhaustion_fails_with_one_error_per_attempt_and_options_apply():
    result = tasks.always_fails.enqueue()
    job = awa.get_job(int(result.id))
    assert job.max_attempts == 2 and job.tags == ["django-task"]
    run_burst(burst_wait_s=5)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.is_finished
    assert len(result.errors) == 2 and result.attempts == 2
    assert {e.exception_class_path for e in result.errors} == {"builtins.ValueError"}
    assert result.finished_at is not None
    with pytest.raises(ValueError, match="failed"):
        result.return_value  # noqa: B018


@override_settings(
    AWA={**FAST_RETRY, "QUEUES": {"default": {"concurrency": 1, "dlq": True}, "email": {}}},
    TASKS={
        "default": {
            "BACKEND": "awa_django.tasks.AwaBackend",
            "QUEUES": ["default", "email"],
            "OPTIONS": {"max_attempts": 2},
        }
    },
)
def test_a_task_that_fails_for_good_on_a_dlq_queue_is_held_there_and_reads_failed(received):
    result = tasks.always_fails.enqueue()
    run_burst(burst_wait_s=5)
    result.refresh()
    assert awa.get_job(int(result.id)).state == "dlq"
    assert result.status == TaskResultStatus.FAILED and result.is_finished
    assert len(result.errors) == 2 and result.finished_at is not None
    finished = [status for name, _, _, status in received if name == "finished"]
    assert finished == [TaskResultStatus.READY, TaskResultStatus.FAILED]
    entry = awa.dlq.get(int(result.id))
    assert entry is not None and entry.dlq_reason == "attempts_exhausted"
    assert entry.kind == "django.tasks:tests.tasks.tasks.always_fails"

    # Retried from the DLQ, the task is waiting again under the same id, its errors kept.
    assert awa.dlq.retry(int(result.id))
    result.refresh()
    assert result.status == TaskResultStatus.READY and len(result.errors) == 2


@override_settings(
    AWA=FAST_RETRY,
    TASKS={
        "default": {
            "BACKEND": "awa_django.tasks.AwaBackend",
            "QUEUES": ["default", "email"],
            "OPTIONS": {"max_attempts": 5, "tags": ["django-task"]},
        }
    },
)
def test_per_call_max_attempts_overrides_the_options_default():
    result = tasks.always_fails.using(max_attempts=2).enqueue()
    job = awa.get_job(int(result.id))
    # max_attempts was set on the task, tags were not: they still come from OPTIONS.
    assert job.max_attempts == 2 and job.tags == ["django-task"]
    run_burst(burst_wait_s=5)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 2 and len(result.errors) == 2
    assert tasks.always_fails.get_result(result.id).task.max_attempts == 2
    # The task itself is untouched: using() returned a copy.
    assert tasks.always_fails.max_attempts is None


def test_tags_and_max_attempts_from_the_decorator_and_per_call_reach_the_job():
    declared = tasks.tagged.enqueue("declared")
    per_call = tasks.tagged.using(tags=["billing", "eu"], priority=10).enqueue("per call")
    untagged = tasks.tagged.using(tags=[]).enqueue("untagged")
    assert awa.get_job(int(declared.id)).tags == ["declared"]
    assert awa.get_job(int(per_call.id)).tags == ["billing", "eu"]
    assert awa.get_job(int(untagged.id)).tags == []
    assert {awa.get_job(int(r.id)).max_attempts for r in (declared, per_call, untagged)} == {3}
    assert awa.get_job(int(per_call.id)).priority == -8
    run_burst()
    fetched = tasks.tagged.get_result(per_call.id)
    assert fetched.status == TaskResultStatus.SUCCESSFUL and fetched.return_value == "per call"
    assert fetched.task.tags == ("billing", "eu") and fetched.task.max_attempts == 3
    assert fetched.task.priority == 10


def test_stock_tasks_are_unchanged_by_the_extension():
    assert isinstance(tasks.add, AwaTask)
    assert tasks.add.max_attempts is None and tasks.add.tags is None
    result = tasks.add.using(priority=5).enqueue(1, 2)
    job = awa.get_job(int(result.id))
    # One attempt, as Django's own backends give a task (not AWA["DEFAULT_MAX_ATTEMPTS"]).
    assert job.max_attempts == 1 != get_settings().DEFAULT_MAX_ATTEMPTS and job.tags == []
    assert set(job.metadata[TASK_METADATA_KEY]) == {
        "priority",
        "queue_name",
        "run_after",
        "backend",
    }
    run_burst()
    fetched = tasks.add.get_result(result.id)
    assert fetched.return_value == 3 and fetched.task.priority == 5
    assert fetched.task.max_attempts is None and fetched.task.tags is None


@pytest.mark.parametrize(
    "options",
    [
        {"max_attempts": 0},
        {"max_attempts": 1001},
        {"max_attempts": True},
        {"tags": "billing"},
        {"tags": [""]},
        {"tags": [f"t{i}" for i in range(21)]},
        {"tags": ["nul\x00"]},
        {"tags": ["\ud800"]},
    ],
)
def test_invalid_awa_options_are_refused_where_the_task_is_copied(options):
    with pytest.raises(InvalidTask):
        tasks.add.using(**options)


def test_arguments_and_the_return_value_keep_their_floats():
    result = tasks.echo.enqueue(1e16, [2.5e20, 0.5], big=-1.5e300, whole=3.0)
    expected = {"args": [1e16, [2.5e20, 0.5]], "kwargs": {"big": -1.5e300, "whole": 3.0}}
    stored = tasks.echo.get_result(result.id)
    assert exact_repr({"args": stored.args, "kwargs": stored.kwargs}) == exact_repr(expected)
    run_burst()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert exact_repr(result.return_value) == exact_repr(expected)


@pytest.mark.parametrize(
    ("args", "kwargs", "field"),
    [
        ((1, -0.0), {}, "args[1]"),
        ((), {"name": "lone \ud800"}, "kwargs.name"),
        (([{"at": timezone.now()}],), {}, "args[0][0].at"),
    ],
)
def test_a_refused_argument_is_named_as_the_caller_passed_it(args, kwargs, field):
    with transaction.atomic():
        with pytest.raises(awa.InvalidJob) as refused:
            tasks.echo.enqueue(*args, **kwargs)
        kept = tasks.add.enqueue(1, 2)  # the transaction is still usable
    assert refused.value.field == field
    assert str(refused.value).startswith(f"{field} ")
    assert tasks.add.get_result(kept.id).status == TaskResultStatus.READY


def test_tuples_are_normalised_as_django_specifies_and_reach_the_task_as_lists():
    result = tasks.echo.enqueue((1, 2), nested={"t": (3, (4,))}, raw=b"bytes")
    assert result.args == [[1, 2]] and result.kwargs == {"nested": {"t": [3, [4]]}, "raw": "bytes"}
    run_burst()
    done = tasks.echo.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.args == [[1, 2]] and done.kwargs == {"nested": {"t": [3, [4]]}, "raw": "bytes"}
    assert done.return_value == {"args": [[1, 2]], "kwargs": done.kwargs}


@pytest.mark.parametrize(
    "result_id",
    ["99999999999999999999", str(2**63), "0", "-1", " 1", "1 ", "+1", "\u0661", "x", ""],
)
def test_any_malformed_or_out_of_range_result_id_does_not_exist(result_id):
    existing = tasks.add.enqueue(1, 2)
    assert tasks.add.get_result(existing.id).status == TaskResultStatus.READY
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(result_id)


def test_cancel_before_it_runs_reads_as_failed_without_attempts():
    result = tasks.add.enqueue(1, 1)
    assert awa.cancel(int(result.id), reason="changed my mind")
    run_burst()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and notes() == []
    assert result.attempts == 0
    assert [(e.exception_class_path, e.traceback) for e in result.errors] == [
        ("awa_django.exceptions.Cancel", "changed my mind")
    ]


def test_cancel_while_running_reads_as_failed_with_the_reason():
    # No maintenance: a prune would move the cancelled job out of the ring, and its claims
    # (worker ids) with it, before the assertions below.
    worker = BackgroundWorker(maintenance=False).start()
    try:
        result = tasks.nap.enqueue(1.0)
        wait_until(lambda: notes() == ["nap start"])
        assert tasks.nap.get_result(result.id).status == TaskResultStatus.RUNNING
        assert awa.cancel(int(result.id), reason="no longer needed")
    finally:
        worker.stop()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.attempts == 1
    assert [e.exception_class_path for e in result.errors] == ["awa_django.exceptions.Cancel"]
    assert result.errors[0].traceback == "no longer needed"


@pytest.mark.parametrize(
    ("task_name", "message"), [("huge_result", "byte cap"), ("not_json", "has no JSON form")]
)
def test_unstorable_return_value_fails_the_task(task_name, message):
    result = getattr(tasks, task_name).enqueue()
    run_burst()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.attempts == 1
    assert result.errors[0].exception_class_path == "awa_django.exceptions.InvalidReturnValue"
    assert message in result.errors[0].traceback


def test_results_of_plain_awa_jobs_are_not_task_results():
    from tests.jobs import noop

    job_id = noop.enqueue()
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result(str(job_id))
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result("not-an-id")


def test_a_real_worker_process_runs_tasks(worker_process):
    with transaction.atomic():
        added = tasks.add.enqueue(20, 22)
        shouted = tasks.shout.enqueue("from a worker")
        contextual = tasks.with_context.enqueue(label="process")
    worker = worker_process("--burst")
    assert worker.wait(timeout=60) == 0, worker.output
    added.refresh()
    assert added.return_value == 42 and added.worker_ids[0] != ""
    assert tasks.shout.get_result(shouted.id).return_value == "FROM A WORKER"
    assert tasks.with_context.get_result(contextual.id).return_value["attempt"] == 1


MISSING_TASK = "django.tasks:tests.tasks.missing_module.gone"


def test_a_task_this_process_cannot_import_is_refused_at_enqueue():
    with pytest.raises(awa.InvalidJob) as refused:
        awa.enqueue(MISSING_TASK, args={"args": []})
    assert refused.value.field == "kind"
    assert "django.tasks task 'tests.tasks.missing_module.gone'" in str(refused.value)
    assert awa.list_jobs() == []


def test_a_task_the_worker_cannot_import_waits_as_an_unknown_kind():
    # Enqueued by a producer that has the task (here: one told another service runs it).
    with override_settings(AWA={**settings.AWA, "EXTERNAL_KINDS": ["django.tasks:*"]}):
        job_id = awa.enqueue(MISSING_TASK, args={"args": []}, max_attempts=1)
    run_burst()
    job = awa.get_job(job_id)
    assert (job.state, job.attempt) == ("retryable", 0)
    (error,) = job.errors
    assert error["type"] == "awa_django.exceptions.UnknownJobKind"
    assert "cannot import as a Task" in error["message"]
    assert error["tries"] == 1


def test_building_the_backend_touches_no_database():
    with CaptureQueriesContext(connection) as queries:
        backend = AwaBackend("other", {"OPTIONS": {"max_attempts": 3, "tags": ["t"]}})
    assert len(queries) == 0
    assert backend.max_attempts == 3 and backend.tags == ("t",)


def test_unknown_options_are_refused():
    with pytest.raises(ImproperlyConfigured, match="unknown keys"):
        AwaBackend("other", {"OPTIONS": {"max_attempt": 3}})


def test_check_reports_queues_awa_does_not_declare():
    backend = AwaBackend(
        "other",
        {"QUEUES": ["default", "nope", "mapped"], "OPTIONS": {"queue_map": {"mapped": "email"}}},
    )
    assert [(m.id, "'nope'" in m.msg) for m in backend.check()] == [("awa.E101", True)]


def test_a_resolver_whose_dependency_is_missing_leaves_the_kind_unknown(monkeypatch):
    from awa_django.apps import _resolve_django_task
    from awa_django.declarations.jobs import JobRegistry

    # Where django.tasks is missing, importing the runner fails: None in sys.modules makes any
    # import of it raise ImportError.
    monkeypatch.setitem(sys.modules, "awa_django.tasks.runner", None)
    registry = JobRegistry()
    registry.add_resolver("x:", _resolve_django_task)
    registry.add_resolver("django.tasks:", _resolve_django_task)
    assert registry.get("x:anything") is None
    assert registry.get("django.tasks:tests.tasks.tasks.add") is None
