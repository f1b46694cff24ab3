"""Enqueue: transactional semantics and validation before any write."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

import awa_django as awa
from awa_django.storage.statement import ROWS_PER_WRITE
from tests.conftest import run_burst
from tests.jobs import record, typed


def awa_row_count() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM awa.ready_entries) "
            "+ (SELECT count(*) FROM awa.deferred_jobs)"
        )
        return cursor.fetchone()[0]


def runs_of(job_id: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM tests_job_runs WHERE job_id = %s", [job_id])
        return cursor.fetchone()[0]


@pytest.fixture
def elsewhere():
    """Kinds "elsewhere.*" are another service's: enqueued here without a handler."""
    with override_settings(AWA={**settings.AWA, "EXTERNAL_KINDS": ["elsewhere.*"]}):
        yield


@pytest.mark.usefixtures("awa_db")
def test_job_in_rolled_back_block_never_exists_and_never_runs():
    class Boom(Exception):
        pass

    with pytest.raises(Boom), transaction.atomic():
        rolled_back = record.enqueue(n=1)
        raise Boom
    with transaction.atomic():
        committed = record.enqueue(n=2)

    run_burst()

    assert awa.get_job(rolled_back) is None
    assert runs_of(rolled_back) == 0
    assert awa.get_job(committed).state == "completed"
    assert runs_of(committed) == 1


@pytest.mark.usefixtures("awa_db")
def test_enqueue_many_rolls_back_with_the_transaction():
    with pytest.raises(RuntimeError), transaction.atomic():
        record.enqueue_many([{"n": i} for i in range(5)])
        raise RuntimeError
    assert awa_row_count() == 0


@pytest.mark.usefixtures("awa_db")
def test_enqueue_on_commit_waits_for_commit_and_skips_rollback():
    with transaction.atomic():
        record.enqueue_on_commit(n=1)
        assert awa_row_count() == 0
    assert awa_row_count() == 1
    with pytest.raises(RuntimeError), transaction.atomic():
        record.enqueue_on_commit(n=2)
        raise RuntimeError
    assert awa_row_count() == 1


@pytest.mark.usefixtures("awa_db")
def test_enqueue_on_commit_returns_a_handle_that_learns_the_id_at_commit_and_can_be_waited_on():
    with transaction.atomic():
        pending = record.enqueue_on_commit(n=3)
        assert (pending.job_id, pending.enqueued, pending.kind) == (None, False, "tests.record")
        assert repr(pending) == "<PendingJob tests.record pending commit>"
        # Nothing to wait for yet: the job cannot exist before the commit.
        with pytest.raises(awa.JobNotFound, match="its transaction has not committed"):
            awa.wait(pending, timeout=1)
    assert pending.enqueued
    assert awa.get_job(pending.job_id).kind == "tests.record"
    assert repr(pending) == f"<PendingJob tests.record job_id={pending.job_id}>"
    run_burst()
    assert awa.wait(pending, timeout=5).state == "completed"
    assert runs_of(pending.job_id) == 1
    # Outside a transaction the job is enqueued at once; after a rollback it never is.
    assert awa.enqueue_on_commit(record, args={"n": 4}).enqueued
    with pytest.raises(RuntimeError), transaction.atomic():
        rolled_back = awa.enqueue_on_commit(record, args={"n": 5})
        raise RuntimeError
    assert rolled_back.job_id is None


@pytest.mark.usefixtures("awa_db")
def test_job_enqueued_signal_fires_after_commit_only():
    from awa_django.signals import job_enqueued

    seen = []

    def receiver(sender, job_ids, kind, queue, **kwargs):
        seen.append((tuple(job_ids), kind, queue))

    job_enqueued.connect(receiver)
    try:
        with transaction.atomic():
            job_id = record.enqueue(n=1)
            assert seen == []
        with pytest.raises(RuntimeError), transaction.atomic():
            record.enqueue(n=2)
            raise RuntimeError
    finally:
        job_enqueued.disconnect(receiver)
    assert seen == [((job_id,), "tests.record", "default")]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: typed.enqueue(user_id="x", email="a"), "args.user_id"),
        (lambda: typed.enqueue(email="a"), "args.user_id"),
        (lambda: awa.enqueue(typed, args={"user_id": 1, "email": "a"}, queue="nope"), "queue"),
        (lambda: awa.enqueue(typed, args={"user_id": 1, "email": "a"}, priority=0), "priority"),
        (lambda: awa.enqueue(typed, args={"user_id": 1, "email": "a"}, priority=5), "priority"),
        (
            lambda: awa.enqueue(typed, args={"user_id": 1, "email": "a"}, max_attempts=-1),
            "max_attempts",
        ),
        (
            lambda: awa.enqueue(typed, args={"user_id": 1, "email": "a"}, max_attempts=0),
            "max_attempts",
        ),
        (
            lambda: awa.enqueue(
                typed, args={"user_id": 1, "email": "a"}, run_at=datetime(2030, 1, 1)
            ),
            "run_at",
        ),
        (lambda: awa.enqueue(typed, args={"user_id": 1, "email": "a"}, tags=[1]), "tags[0]"),
        (
            lambda: awa.enqueue(
                typed, args={"user_id": 1, "email": "a"}, metadata={"at": timezone.now()}
            ),
            "metadata.at",
        ),
        (lambda: awa.enqueue("elsewhere.other", args={"when": timezone.now()}), "args.when"),
        (
            lambda: typed.enqueue_many(
                [{"user_id": 1, "email": "a"}, {"user_id": "2", "email": "b"}]
            ),
            "args_list[1].user_id",
        ),
    ],
)
def test_invalid_enqueue_raises_before_any_write(call, field, elsewhere):
    with pytest.raises(awa.InvalidJob) as caught:
        call()
    assert caught.value.field == field
    assert awa_row_count() == 0


@pytest.mark.django_db
def test_an_external_kind_can_be_enqueued_by_name(elsewhere):
    job_id = awa.enqueue("elsewhere.kind", args={"x": 1}, queue="email", priority=1, tags=["t"])
    job = awa.get_job(job_id)
    assert (job.kind, job.queue, job.priority, job.args, job.tags, job.state) == (
        "elsewhere.kind",
        "email",
        1,
        {"x": 1},
        ["t"],
        "available",
    )


@pytest.mark.django_db
def test_future_run_at_is_scheduled_and_past_is_available():
    scheduled = awa.enqueue(record, args={"n": 1}, run_at=timedelta(minutes=5))
    now_job = awa.enqueue(record, args={"n": 2}, run_at=timezone.now() - timedelta(seconds=1))
    states = {j.job_id: j.state for j in awa.get_jobs([scheduled, now_job])}
    assert states == {scheduled: "scheduled", now_job: "available"}


@pytest.mark.usefixtures("awa_db")
@pytest.mark.parametrize("run_at", [None, timedelta(hours=1)], ids=["ready", "deferred"])
def test_bad_argument_deep_in_a_streamed_batch_writes_nothing_and_keeps_the_callers_work(run_at):
    # Arguments are checked while COPY streams; the bad one comes after several chunks of rows
    # have reached the server, so the COPY itself must be aborted and rolled back.
    args = [{"user_id": i, "email": "a"} for i in range(3 * ROWS_PER_WRITE)]
    args[-2] = {"user_id": "not a number", "email": "a"}
    with transaction.atomic():
        kept = record.enqueue(n=1)
        with pytest.raises(awa.InvalidJob) as caught:
            typed.enqueue_many(args, run_at=run_at)
        after = record.enqueue(n=2)
    assert caught.value.field == f"args_list[{len(args) - 2}].user_id"
    assert awa_row_count() == 2
    assert [job.job_id for job in awa.get_jobs([kept, after])] == [kept, after]


@pytest.mark.django_db
def test_enqueue_many_returns_ids_in_order_and_defers_future_batches():
    ids = record.enqueue_many([{"n": i} for i in range(3)])
    jobs = awa.get_jobs(ids)
    assert [j.args["n"] for j in jobs] == [0, 1, 2]
    assert {j.state for j in jobs} == {"available"}
    later = record.enqueue_many([{"n": 9}], run_at=timedelta(hours=1))
    assert awa.get_job(later[0]).state == "scheduled"
    assert record.enqueue_many([]) == []


AWKWARD_TEXT = 'tab\t newline\n backslash\\ quote" brace} é 漢 😀 \\N'


@pytest.mark.django_db
@pytest.mark.parametrize("run_at", [None, timedelta(hours=1)], ids=["ready", "deferred"])
def test_copied_arguments_and_metadata_come_back_exactly(run_at, elsewhere):
    # COPY receives pre-serialized JSON text: escaping must leave every character intact.
    args = [{"note": AWKWARD_TEXT, "n": i} for i in range(2)]
    tags = [AWKWARD_TEXT, "a,b", "{x}", "NULL", 'say "hi"', "back\\slash"]
    ids = awa.enqueue_many(
        "elsewhere.unregistered", args, run_at=run_at, metadata={"m": AWKWARD_TEXT}, tags=tags
    )
    jobs = awa.get_jobs(ids)
    assert [j.args for j in jobs] == args
    assert all(j.metadata["m"] == AWKWARD_TEXT for j in jobs)
    assert all(list(j.tags) == tags for j in jobs)


def test_job_decorator_rejects_out_of_range_options():
    with pytest.raises(awa.InvalidJob, match="priority"):
        awa.job(priority=0)(lambda ctx: None)
    with pytest.raises(awa.InvalidJob, match="max_attempts"):
        awa.job(max_attempts=0)(lambda ctx: None)


@pytest.mark.django_db
def test_non_dict_metadata_is_invalid_job():
    with pytest.raises(awa.InvalidJob) as caught:
        awa.enqueue(record, args={"n": 1}, metadata="nope")
    assert caught.value.field == "metadata"


@pytest.mark.django_db
def test_enqueue_by_name_imports_jobs_modules_and_applies_the_handler_defaults(monkeypatch):
    from awa_django.declarations import discovery
    from awa_django.declarations.jobs import registry

    imported = []
    monkeypatch.setattr(discovery, "discover_jobs", lambda: imported.append(True))
    discovery.ensure_jobs_discovered.cache_clear()
    job_id = awa.enqueue("tests.always_fails", args={"message": "x"})
    assert awa.get_job(job_id).max_attempts == 3  # the decorator's value, not the default 25
    assert imported == []  # already registered: no import needed
    assert registry.get("tests.not_anywhere") is None
    with pytest.raises(awa.InvalidJob):
        awa.enqueue("tests.always_fails", args={"unknown": 1})
    for _ in range(2):
        with pytest.raises(awa.InvalidJob, match=r"'tests\.not_anywhere' has no handler"):
            awa.enqueue("tests.not_anywhere", args={})
    assert imported == [True]  # one import pass per process, on the first miss
    discovery.ensure_jobs_discovered.cache_clear()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "call",
    [
        lambda: awa.enqueue("tests.recrod", args={"n": 1}),
        lambda: awa.enqueue_many("tests.recrod", [{"n": 1}]),
        lambda: awa.enqueue_on_commit("tests.recrod", args={"n": 1}),
    ],
    ids=["enqueue", "enqueue_many", "enqueue_on_commit"],
)
def test_a_kind_no_handler_registers_is_refused_with_the_nearest_one(call):
    with pytest.raises(awa.InvalidJob) as refused:
        call()
    assert refused.value.field == "kind"
    message = str(refused.value)
    assert message.startswith("kind 'tests.recrod' has no handler in this process. ")
    assert "Did you mean 'tests.record'?" in message
    assert "jobs.py" in message and "AWA['JOB_MODULES']" in message
    assert "AWA['EXTERNAL_KINDS']" in message
    assert awa_row_count() == 0


@pytest.mark.django_db
def test_a_kind_nothing_resembles_is_refused_without_a_guess():
    with pytest.raises(awa.InvalidJob) as refused:
        awa.enqueue("zzz", args={})
    assert "Did you mean" not in str(refused.value)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("patterns", "kind", "allowed"),
    [
        (["billing.charge"], "billing.charge", True),
        (["billing.charge"], "billing.charge_later", False),
        (["billing.*"], "billing.charge_later", True),
        (["billing.*"], "billingx.charge", False),
        (["*"], "anything.at_all", True),
    ],
)
def test_external_kinds_are_exact_kinds_or_prefixes(patterns, kind, allowed):
    with override_settings(AWA={**settings.AWA, "EXTERNAL_KINDS": patterns}):
        if allowed:
            assert awa.get_job(awa.enqueue(kind, args={})).kind == kind
        else:
            with pytest.raises(awa.InvalidJob, match="has no handler"):
                awa.enqueue(kind, args={})
