"""Queues living in another database of ``DATABASES`` (issue #37 part 3), on two real servers:
``make test`` starts the second one (scripts/with_postgres.py --second, ``DATABASE_URL_2``),
which the example project's settings name ``second``."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, connections, transaction
from django.test import override_settings

import awa_django as awa
from awa_django import conf
from awa_django.management.command import require_migrated
from awa_django.ops import health
from awa_django.storage.control import reset_all
from awa_django.storage.statement import run
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "second"])

QUEUES: dict[str, Any] = {
    **settings.AWA["QUEUES"],
    "video": {"concurrency": 4, "database": "second"},
}


def second_url() -> str:
    params = connections["second"].settings_dict
    return f"postgres://{params['USER']}@{params['HOST']}:{params['PORT']}/{params['NAME']}"


def reset_second() -> None:
    with connections["second"].cursor() as cursor:
        run(cursor, reset_all())


@pytest.fixture
def two_databases(awa_db: None) -> Iterator[None]:
    """The ``video`` queue in database ``second``, emptied before and after the test."""
    reset_second()
    with override_settings(AWA={**settings.AWA, "QUEUES": QUEUES}):
        yield
    reset_second()


def count_jobs(alias: str, queue: str) -> int:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.jobs WHERE queue = %s", [queue])
        (count,) = cursor.fetchone()
    return int(count)


def test_an_unknown_alias_is_e090() -> None:
    with override_settings(AWA={"QUEUES": {"default": {}, "video": {"database": "nope"}}}):
        found = conf.problems()
    assert [p.id for p in found] == ["awa.E090"]
    assert "'video'" in found[0].message and "'nope'" in found[0].message
    with override_settings(AWA={"QUEUES": {"default": {}, "video": {"database": 3}}}):
        assert [p.id for p in conf.problems()] == ["awa.E090"]


def reread_databases() -> None:
    # Django's connection handler reads DATABASES once, when first used.
    connections._settings = None
    del connections.settings


def test_a_database_that_is_not_postgresql_is_e090() -> None:
    lite = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}
    with (
        pytest.warns(UserWarning, match="DATABASES"),
        override_settings(DATABASES={**settings.DATABASES, "lite": lite}),
    ):
        reread_databases()
        try:
            with override_settings(AWA={"QUEUES": {"default": {}, "v": {"database": "lite"}}}):
                found = conf.problems()
        finally:
            connections["lite"].close()
    reread_databases()
    assert "lite" not in connections.settings
    assert [p.id for p in found] == ["awa.E090"]
    assert "sqlite" in found[0].message and "'v'" in found[0].message


def test_a_pooled_queue_database_is_w060(monkeypatch: pytest.MonkeyPatch) -> None:
    from awa_django.checks import check_worker_session

    monkeypatch.setitem(settings.DATABASES["second"], "DISABLE_SERVER_SIDE_CURSORS", True)
    with override_settings(AWA={**settings.AWA, "QUEUES": QUEUES}):
        (warning,) = check_worker_session()
        assert warning.id == "awa.W060" and "'second'" in warning.msg
        assert "WORKER_DATABASE" not in (warning.hint or "")
    assert check_worker_session() == []  # no queue lives there


def test_migrate_database_installs_the_schema_on_the_second_server() -> None:
    # The test database of "second" was created by migrate --database second; again is a no-op.
    call_command("migrate", database="second", verbosity=0)
    require_migrated("second")
    with connections["second"].cursor() as cursor:
        cursor.execute("SELECT inet_server_port()")
        (port,) = cursor.fetchone()
    with connection.cursor() as cursor:
        cursor.execute("SELECT inet_server_port()")
        (default_port,) = cursor.fetchone()
    assert port != default_port  # two servers, not two databases of one


def test_enqueue_joins_a_transaction_on_the_queues_alias(two_databases: None) -> None:
    with transaction.atomic(using="second"):
        kept = awa.enqueue("tests.record", args={"n": 1}, queue="video")
    with pytest.raises(RuntimeError), transaction.atomic(using="second"):
        awa.enqueue("tests.record", args={"n": 2}, queue="video")
        raise RuntimeError("roll back")
    with transaction.atomic(using="second"):
        many = awa.enqueue_many("tests.record", [{"n": 3}, {"n": 4}], queue="video")
    assert count_jobs("second", "video") == 3
    assert count_jobs("default", "video") == 0
    assert awa.get_job(kept, database="second") is not None
    assert len(many) == 2


def test_enqueue_in_a_transaction_on_another_alias_is_refused(two_databases: None) -> None:
    with transaction.atomic():
        with pytest.raises(awa.InvalidJob) as refused:
            awa.enqueue("tests.record", args={"n": 1}, queue="video")
        assert refused.value.field == "queue"
        assert "'video'" in str(refused.value)
        assert "'second'" in str(refused.value) and "'default'" in str(refused.value)
        with pytest.raises(awa.InvalidJob):
            awa.enqueue_many("tests.record", [{"n": 1}], queue="video")
        # The deferred form waits for the caller's commit, then writes to the queue's database.
        pending = awa.enqueue_on_commit("tests.record", args={"n": 2}, queue="video")
        # A queue of the caller's own database still joins its transaction.
        awa.enqueue("tests.record", args={"n": 3})
    assert pending.job_id is not None
    assert count_jobs("second", "video") == 1
    assert awa.get_job(pending.job_id, database="second") is not None
    # Outside any transaction each enqueue is its own, wherever the queue lives.
    awa.enqueue("tests.record", args={"n": 4}, queue="video")
    assert count_jobs("second", "video") == 2


def test_a_job_declared_on_a_queue_of_another_database_goes_there(two_databases: None) -> None:
    # The django.tasks backend and @awa.job's own enqueue take the same path: the queue decides.
    job_id = awa.enqueue("tests.record", options=awa.EnqueueOptions(queue="video"))
    assert count_jobs("second", "video") == 1
    assert awa.get_job(job_id, database="second") is not None


def test_an_eager_job_of_another_database_runs_there(two_databases: None) -> None:
    with transaction.atomic(using="second"):
        job_id = awa.enqueue("tests.record", args={"n": 7}, queue="video", eager=True)
    record = awa.get_job(job_id, database="second")
    assert record is not None and record.state == "completed"
    assert runs() == Counter({"7": 1})


def test_a_workflow_with_a_step_on_another_database_is_refused(two_databases: None) -> None:
    flow = (
        awa.Workflow("split")
        .step("a", "tests.record", args={"n": 1})
        .step("b", "tests.record", args={"n": 2}, queue="video", after=["a"])
    )
    with pytest.raises(awa.InvalidJob) as refused:
        flow.enqueue()
    assert refused.value.field == "steps.b.queue"
    assert "'second'" in str(refused.value)


def test_get_job_searches_every_database(two_databases: None) -> None:
    # Ids count per database: both sequences are set past every id either has given (the
    # suite's earlier tests may have drawn thousands more on one side), so the next job on
    # each side gets the same id.
    on_default = awa.enqueue("tests.record", args={"n": 1})
    on_second = awa.enqueue("tests.record", args={"n": 2}, queue="video")
    for alias in ("default", "second"):
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT setval('awa.job_id_seq', %s)", [max(on_default, on_second)])
    on_default = awa.enqueue("tests.record", args={"n": 1})
    on_second = awa.enqueue("tests.record", args={"n": 2}, queue="video")
    assert on_default == on_second
    with pytest.raises(ValueError, match="pass database="):
        awa.get_job(on_default)
    record = awa.get_job(on_second, database="second")
    assert record is not None and record.queue == "video"
    record = awa.get_job(on_default, database="default")
    assert record is not None and record.queue == "default"
    # An id only one database holds needs no database=.
    only_default = awa.enqueue("tests.record", args={"n": 3})
    found = awa.get_job(only_default)
    assert found is not None and found.queue == "default"
    with pytest.raises(ValueError, match="holds no awa queue"):
        awa.get_job(on_default, database="nope")


def test_the_worker_refuses_a_queue_of_another_database(two_databases: None) -> None:
    with pytest.raises(CommandError, match="lives in database 'second'"):
        call_command("awa_worker", "--database", "default", "--queue", "video", "--burst")
    with pytest.raises(CommandError, match="holds no awa queue"):
        call_command("awa_worker", "--database", "nope", "--burst")


def runs() -> Counter[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT note FROM tests_job_runs")
        return Counter(note for (note,) in cursor.fetchall())


def test_a_worker_per_database_drains_both_exactly_once_with_a_leader_each(
    two_databases: None, worker_process: Any
) -> None:
    env = {
        "DATABASE_URL_2": second_url(),
        "AWA_OVERRIDES": json.dumps({"QUEUES": QUEUES, "LEADER_ELECTION_INTERVAL_S": 0.2}),
    }
    on_default = worker_process("--database", "default", env=env).wait_ready()
    on_second = worker_process("--database", "second", env=env).wait_ready()
    assert "'video'" in on_second.output and "'video'" not in on_default.output
    # Each database elects its own leader: both processes lead, one database each.
    wait_until(lambda: "became maintenance leader" in on_default.output)
    wait_until(lambda: "became maintenance leader" in on_second.output)
    awa.enqueue_many("tests.record", [{"n": n} for n in range(40)])
    awa.enqueue_many("tests.record", [{"n": 1000 + n} for n in range(40)], queue="video")
    # A scheduled job on the second database is promoted by that database's leader.
    awa.enqueue("tests.record", args={"n": 2000}, queue="video", run_at=timedelta(seconds=0.5))
    wait_until(lambda: sum(runs().values()) == 81, timeout=30)
    done = runs()
    expected = {str(n) for n in [*range(40), *range(1000, 1040), 2000]}
    assert set(done) == expected and set(done.values()) == {1}, done
    assert count_jobs("default", "video") == 0


def test_one_worker_process_serves_the_queues_of_both_databases(
    two_databases: None, worker_process: Any
) -> None:
    env = {
        "DATABASE_URL_2": second_url(),
        "AWA_OVERRIDES": json.dumps({"QUEUES": QUEUES, "LEADER_ELECTION_INTERVAL_S": 0.2}),
    }
    worker = worker_process(env=env).wait_ready()
    # It leads the maintenance of each database, with a session (LISTEN, lock) in each.
    wait_until(lambda: worker.output.count("became maintenance leader") == 2)
    # awa_health checks each database: its leader, and a live worker for each of its queues.
    wait_until(lambda: health.check().healthy)
    names = {c.name for c in health.check().checks}
    assert {"leader (default)", "leader (second)", "queues (second)"} <= names
    with transaction.atomic(using="second"):
        awa.enqueue_many("tests.record", [{"n": 1000 + n} for n in range(40)], queue="video")
    awa.enqueue_many("tests.record", [{"n": n} for n in range(40)])
    later = awa.enqueue(
        "tests.record", args={"n": 2000}, queue="video", run_at=timedelta(seconds=0.5)
    )
    # awa.wait listens on the job's database.
    assert awa.wait(later, timeout=20, database="second").queue == "video"
    wait_until(lambda: sum(runs().values()) == 81, timeout=30)
    done = runs()
    expected = {str(n) for n in [*range(40), *range(1000, 1040), 2000]}
    assert set(done) == expected and set(done.values()) == {1}, done

    def sessions_on_second() -> int:
        with connections["second"].cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE application_name = 'awa_worker_session'"
            )
            (count,) = cursor.fetchone()
        return int(count)

    # Eventually: the backends of the previous test's killed workers may linger a moment.
    wait_until(lambda: sessions_on_second() == 1)


def test_a_burst_worker_drains_both_databases_and_exits(
    two_databases: None, worker_process: Any
) -> None:
    env = {"DATABASE_URL_2": second_url(), "AWA_OVERRIDES": json.dumps({"QUEUES": QUEUES})}
    awa.enqueue_many("tests.record", [{"n": n} for n in range(5)])
    awa.enqueue_many("tests.record", [{"n": 100 + n} for n in range(5)], queue="video")
    worker = worker_process("--burst", env=env)
    assert worker.wait(60) == 0, worker.output
    assert sum(runs().values()) == 10
    assert worker.output.count("worker ready") == 2
    assert "database=default" in worker.output and "database=second" in worker.output


def test_a_django_task_on_a_queue_of_another_database(two_databases: None) -> None:
    from awa_django.tasks.compat import TaskResultStatus, task_enqueued
    from tests.tasks import tasks

    sent: list[str] = []

    def receiver(sender: Any, task_result: Any, **kwargs: Any) -> None:
        sent.append(task_result.id)

    moved = {**QUEUES, "email": {"database": "second"}}
    task_enqueued.connect(receiver, weak=False)
    try:
        with override_settings(AWA={**settings.AWA, "QUEUES": moved}):
            with transaction.atomic(using="second"):
                result = tasks.shout.enqueue("hi")
                # The signal waits for the commit of the queue's database.
                assert sent == []
            assert sent == [result.id]
            assert count_jobs("second", "email") == 1
            assert tasks.shout.get_result(result.id).status == TaskResultStatus.READY
    finally:
        task_enqueued.disconnect(receiver)


def test_awa_maintenance_leads_each_database(two_databases: None, worker_process: Any) -> None:
    env = {
        "DATABASE_URL_2": second_url(),
        "AWA_OVERRIDES": json.dumps({"QUEUES": QUEUES, "LEADER_ELECTION_INTERVAL_S": 0.2}),
    }
    maintenance = worker_process(env=env, command="awa_maintenance").wait_ready()
    wait_until(lambda: maintenance.output.count("became maintenance leader") == 2)
    # The second database's leader promotes its due jobs; no worker runs them here.
    job_id = awa.enqueue("tests.record", queue="video", run_at=timedelta(seconds=0.3))

    def promoted() -> bool:
        record = awa.get_job(job_id, database="second")
        return record is not None and record.state == "available"

    wait_until(promoted, timeout=15)
