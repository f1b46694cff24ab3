"""Operators see every database (issue #37 part 3): the ops calls, the commands and the admin
take a database (``database=``, ``--database``, ``?database=``), default to the queue's when
they name one, and refuse an alias holding no queue. On two real servers."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connections
from django.test import Client, override_settings

import awa_django as awa
from awa_django.ops import actions, queues, records, runtimes
from awa_django.worker.in_process import InProcessRunner
from tests.jobs import terminal
from tests.multidb.test_multidb import reset_second

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "second"])

QUEUES: dict[str, Any] = {
    **settings.AWA["QUEUES"],
    "video": {"concurrency": 4, "database": "second", "dlq": True},
}


@pytest.fixture
def two_databases(awa_db: None) -> Iterator[None]:
    """The ``video`` queue (with a DLQ) in database ``second``, emptied before and after."""
    reset_second()
    with override_settings(AWA={**settings.AWA, "QUEUES": QUEUES}):
        yield
    reset_second()


def state_in(alias: str, job_id: int) -> str | None:
    record = records.get_job(job_id, database=alias)
    return None if record is None else record.state


def paused_in(alias: str, queue: str) -> bool:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT paused FROM awa.queue_meta WHERE queue = %s", [queue])
        row = cursor.fetchone()
    return bool(row and row[0])


def dead_letter_on_second() -> int:
    job_id = awa.enqueue(terminal, queue="video")
    InProcessRunner(database="second").drain(["video"])
    assert state_in("second", job_id) == "dlq"
    return job_id


def test_queue_stats_cover_every_database_or_the_one_named(two_databases: None) -> None:
    awa.enqueue("tests.record", args={"n": 1}, queue="video")
    awa.enqueue("tests.record", args={"n": 2}, queue="video")
    awa.enqueue("tests.record", args={"n": 3})
    found = {(q.queue, q.database): q for q in queues.stats()}
    assert found[("video", "second")].available == 2
    assert found[("default", "default")].available == 1
    # A declared queue is listed in its own database only.
    assert ("video", "default") not in found and ("default", "second") not in found
    assert {q.database for q in queues.stats(database="second")} == {"second"}
    with pytest.raises(awa.UnknownDatabase, match="'nope' holds no awa queue"):
        queues.stats(database="nope")


def test_queue_control_lands_in_the_queues_database(two_databases: None) -> None:
    queues.pause("video", by="ops")
    assert paused_in("second", "video") and not paused_in("default", "video")
    queues.resume("video")
    assert not paused_in("second", "video")
    queues.set_concurrency("video", 2)
    video = next(q for q in queues.stats(database="second") if q.queue == "video")
    assert video.concurrency == 2
    queues.reset_concurrency("video")
    job_id = awa.enqueue("tests.record", args={"n": 1}, queue="video")
    assert queues.drain("video", confirm=True) == 1
    assert state_in("second", job_id) == "cancelled"
    assert [r.queue for r in records.list_jobs(queue="video")] == ["video"]
    with pytest.raises(awa.UnknownDatabase):
        queues.pause("video", database="nope")


def test_job_actions_act_on_the_database_named(two_databases: None) -> None:
    on_second = awa.enqueue("tests.record", args={"n": 1}, queue="video")
    # Job ids count per database: without database= the call means DATABASE_ALIAS's job.
    assert state_in("default", on_second) is None
    assert not actions.cancel(on_second)
    assert actions.cancel(on_second, database="second")
    assert state_in("second", on_second) == "cancelled"
    assert actions.retry(on_second, database="second")
    assert state_in("second", on_second) == "available"
    with pytest.raises(awa.UnknownDatabase):
        actions.cancel(on_second, database="nope")
    with pytest.raises(awa.UnknownDatabase):
        actions.run_now(on_second, database="nope")


def test_the_dlq_of_another_database(two_databases: None) -> None:
    job_id = dead_letter_on_second()
    assert awa.dlq.depth("video") == 1  # the queue's database
    assert awa.dlq.depths() == {"video": 1}  # every database
    assert awa.dlq.depths(database="default") == {}
    assert [e.job_id for e in awa.dlq.list(queue="video")] == [job_id]
    assert awa.dlq.list() == []  # DATABASE_ALIAS
    assert awa.dlq.get(job_id, database="second") is not None
    assert awa.dlq.retry(job_id, database="second")
    assert state_in("second", job_id) == "available"
    InProcessRunner(database="second").drain(["video"])
    assert awa.dlq.purge_bulk(queue="video") == 1
    assert awa.dlq.depths() == {}


def test_runtimes_take_a_database(two_databases: None) -> None:
    assert runtimes.list(database="second") == []
    with pytest.raises(awa.UnknownDatabase):
        runtimes.list(database="nope")


def out(*args: str) -> str:
    buffer = StringIO()
    call_command(*args, stdout=buffer)
    return buffer.getvalue()


def test_commands_take_database_and_default_to_the_queues(two_databases: None) -> None:
    job_id = awa.enqueue("tests.record", args={"n": 1}, queue="video")
    listed = out("awa_queues")
    assert "video" in listed and "second" in listed
    assert "default " not in out("awa_queues", "--database", "second").split("\n", 2)[2]
    assert out("awa_queue", "pause", "video") == "paused video\n"
    assert paused_in("second", "video")
    out("awa_queue", "resume", "video", "--database", "second")
    assert not paused_in("second", "video")
    assert f"{job_id} " in out("awa_jobs", "list", "--queue", "video")
    assert f"{job_id} " in out("awa_jobs", "list", "--database", "second")
    with pytest.raises(CommandError, match=f"no such job: {job_id} in database 'default'"):
        call_command("awa_jobs", "cancel", str(job_id))
    assert out("awa_jobs", "cancel", str(job_id), "--database", "second") == (
        f"{job_id}: cancelled\n"
    )
    assert state_in("second", job_id) == "cancelled"
    for command in (
        ("awa_jobs", "list"),
        ("awa_queues",),
        ("awa_queue", "pause", "video"),
        ("awa_dlq", "depth"),
    ):
        with pytest.raises(CommandError, match=r"^--database: database 'nope' holds no awa queue"):
            call_command(*command, "--database", "nope")


def test_awa_dlq_on_another_database(two_databases: None) -> None:
    job_id = dead_letter_on_second()
    assert "total 1" in out("awa_dlq", "depth")
    assert "total 0" in out("awa_dlq", "depth", "--database", "default")
    assert f"{job_id} " in out("awa_dlq", "list", "--queue", "video")
    assert out("awa_dlq", "retry", str(job_id), "--database", "second") == f"{job_id}: retried\n"
    assert state_in("second", job_id) == "available"


@pytest.fixture
def operator(two_databases: None) -> Client:
    from django.contrib.auth.models import User

    client = Client()
    client.force_login(User.objects.create_superuser("operator", password="pw"))
    return client


ADMIN = "/admin/awa_django"


def test_admin_pages_show_the_database_selected(operator: Client) -> None:
    job_id = awa.enqueue("tests.record", args={"n": 1}, queue="video")
    page = operator.get(f"{ADMIN}/job/?database=second")
    assert page.status_code == 200
    text = page.content.decode()
    assert f"/{job_id}/?database=second" in text  # links keep it
    assert 'name="database"' in text and '<option value="second" selected>' in text
    assert operator.get(f"{ADMIN}/job/{job_id}/?database=second").status_code == 200
    for path in ("job/", "deadletter/", "queue/", "runtimeinstance/"):
        assert operator.get(f"{ADMIN}/{path}?database=second").status_code == 200, path
        refused = operator.get(f"{ADMIN}/{path}?database=nope")
        assert refused.status_code == 400, path
        assert b"'nope' holds no awa queue" in refused.content
    health = operator.get(f"{ADMIN}/queue/?database=second&live=1").content.decode()
    assert "video" in health


def test_queue_health_job_and_drain_pages_link_within_the_database_selected(
    operator: Client,
) -> None:
    job_id = dead_letter_on_second()
    health = operator.get(f"{ADMIN}/queue/?database=second&live=1").content.decode()
    assert "deadletter/?queue=video&amp;database=second" in health  # the DLQ count's link
    assert 'href="?&amp;database=second">Back to the leader' in health
    sampled = operator.get(f"{ADMIN}/queue/?database=second").content.decode()
    assert 'href="?live=1&amp;database=second" id="count-now"' in sampled
    job = operator.get(f"{ADMIN}/job/{job_id}/?database=second").content.decode()
    assert '/job/?database=second">Jobs</a>' in job  # the breadcrumb
    assert f"/deadletter/{job_id}/?database=second" in job
    drain = operator.post(
        f"{ADMIN}/queue/act/?database=second", {"action": "drain", "queue": "video"}
    )
    assert '/queue/?database=second" class="button cancel-link"' in drain.content.decode()


def test_admin_actions_act_on_the_database_selected(operator: Client) -> None:
    job_id = awa.enqueue("tests.record", args={"n": 1}, queue="video")
    response = operator.post(f"{ADMIN}/job/{job_id}/cancel/?database=second")
    assert response.status_code == 302
    assert response["Location"].endswith(f"/{job_id}/?database=second")
    assert state_in("second", job_id) == "cancelled"
    entry = LogEntry.objects.get(object_id=str(job_id))
    assert entry.change_message == "Cancelled. (database second)"
    dead = dead_letter_on_second()
    operator.post(
        f"{ADMIN}/deadletter/act/?database=second",
        {"action": "retry", "job_ids": [dead], "return_query": "database=second"},
    )
    assert state_in("second", dead) == "available"
    operator.post(f"{ADMIN}/queue/act/?database=second", {"action": "pause", "queue": "video"})
    assert paused_in("second", "video")


def queue_meta_names(alias: str) -> set[str]:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT queue FROM awa.queue_meta")
        return {name for (name,) in cursor.fetchall()}


def test_each_database_gets_only_its_own_queues_declarations(two_databases: None) -> None:
    from awa_django.conf import get_settings
    from awa_django.worker.process import config_from_settings

    conf = get_settings()
    on_second = config_from_settings(conf, database="second").declared
    assert [q.queue for q in on_second.queues] == ["video"]
    on_default = config_from_settings(conf, database="default").declared
    assert "video" not in {q.queue for q in on_default.queues}
    assert on_second.kinds == on_default.kinds  # any queue may carry any kind
    # The DLQ switches an in-process runner publishes: its database's queues only.
    InProcessRunner(database="second").publish_policies()
    assert queue_meta_names("second") == {"video"}
    assert awa.descriptors.queues(database="second") == []  # no worker published there yet


def test_awa_audit_checks_the_database_named(two_databases: None) -> None:
    dead_letter_on_second()
    assert out("awa_audit", "--database", "second").endswith("all invariants hold\n")
    with pytest.raises(CommandError, match="holds no awa queue"):
        call_command("awa_audit", "--database", "nope")


def test_the_shard_page_shows_the_database_selected(operator: Client) -> None:
    from awa_django.ops import shards

    shards.set_enqueue_shards("video", 4)  # the queue's database
    assert shards.get_enqueue_shards("video") == 4
    assert shards.enqueue_shard_counts(database="second") == {"video": 4}
    assert "video" not in shards.enqueue_shard_counts()
    page = operator.get(f"{ADMIN}/queue/shards/?database=second&live=1").content.decode()
    assert "video" in page
    assert "video" not in operator.get(f"{ADMIN}/queue/shards/").content.decode()


def store_on_second(name: str) -> None:
    """A schedule of the video queue, stored where its leader would: in database second."""
    from awa_django.declarations.cron import declared_schedules
    from awa_django.storage.cron import sync_cron_jobs
    from awa_django.storage.statement import run
    from tests.maintenance.test_cron import declared

    with declared(name=name, queue="video"):
        (schedule,) = [s for s in declared_schedules() if s.name == name]
    with connections["second"].cursor() as cursor:
        run(cursor, sync_cron_jobs([schedule.as_row()]))


def test_cron_schedules_of_another_database(operator: Client) -> None:
    store_on_second("tests.video_cron")
    assert awa.cron.list() == []
    assert [s.name for s in awa.cron.list(database="second")] == ["tests.video_cron"]
    assert "tests.video_cron" in out("awa_cron", "list", "--database", "second")
    with pytest.raises(CommandError, match="no cron schedule named"):
        call_command("awa_cron", "pause", "tests.video_cron")
    assert out("awa_cron", "pause", "tests.video_cron", "--database", "second").startswith("paused")
    assert awa.cron.list(database="second")[0].paused_at is not None
    page = operator.get(f"{ADMIN}/queue/cron/?database=second").content.decode()
    assert "tests.video_cron" in page
    operator.post(
        f"{ADMIN}/queue/cron/act/?database=second",
        {"action": "trigger", "name": "tests.video_cron"},
    )
    (fired,) = records.list_jobs(queue="video")
    assert fired.kind == "tests.record"


def test_a_queue_only_another_database_holds_is_known_there(operator: Client) -> None:
    # A queue no setting declares, holding a control row in second only (another service's).
    with connections["second"].cursor() as cursor:
        cursor.execute("INSERT INTO awa.queue_meta (queue) VALUES ('adhoc')")
    with pytest.raises(awa.InvalidJob, match="unknown queue 'adhoc'"):
        queues.pause("adhoc")
    queues.pause("adhoc", database="second")
    assert paused_in("second", "adhoc")
    with pytest.raises(CommandError, match="unknown queue 'adhoc'"):
        call_command("awa_queue", "resume", "adhoc")
    out("awa_queue", "resume", "adhoc", "--database", "second")
    assert not paused_in("second", "adhoc")
    operator.post(f"{ADMIN}/queue/act/?database=second", {"action": "pause", "queue": "adhoc"})
    assert paused_in("second", "adhoc")
    entry = LogEntry.objects.get(object_id="adhoc")
    assert entry.change_message == "Paused. (database second)"


def test_a_wait_on_an_unknown_alias_is_refused(two_databases: None) -> None:
    job_id = awa.enqueue("tests.record", args={"n": 1}, queue="video")
    with pytest.raises(awa.UnknownDatabase):
        awa.wait(job_id, timeout=1, database="nope")


def test_a_missing_job_sends_back_to_the_list_of_its_database(operator: Client) -> None:
    response = operator.get(f"{ADMIN}/job/999999/?database=second")
    assert response.status_code == 302 and response["Location"].endswith("/job/?database=second")


def test_dlq_pages_keep_the_database_in_their_links(operator: Client) -> None:
    dead = dead_letter_on_second()
    listing = operator.get(f"{ADMIN}/deadletter/?database=second").content.decode()
    assert f"/deadletter/{dead}/?database=second" in listing
    detail = operator.get(f"{ADMIN}/deadletter/{dead}/?database=second").content.decode()
    assert f"/job/{dead}/?database=second" in detail
    assert "/deadletter/?database=second" in detail
    # Without ?database= the page shows DATABASE_ALIAS, where this entry is not.
    assert f"/deadletter/{dead}/" not in operator.get(f"{ADMIN}/deadletter/").content.decode()


def test_a_page_of_another_database_is_bounded_by_the_statement_timeout(
    operator: Client,
) -> None:
    import threading

    import psycopg

    from tests.multidb.test_multidb import second_url

    def second_timeout() -> str:
        with connections["second"].cursor() as cursor:
            cursor.execute("SHOW statement_timeout")
            return str(cursor.fetchone()[0])

    own = second_timeout()
    # Another session holds second's claims table: the page's statement there waits on it.
    holder = psycopg.connect(second_url())
    holder.execute("LOCK TABLE awa.claim_receipts IN ACCESS EXCLUSIVE MODE")
    guard = threading.Timer(10, holder.rollback)  # the test ends even if nothing cancels it
    guard.start()
    try:
        timeout = {**settings.AWA, "QUEUES": QUEUES, "ADMIN_STATEMENT_TIMEOUT_MS": 300}
        with override_settings(AWA=timeout):
            response = operator.get(f"{ADMIN}/job/?database=second&state=running")
        assert holder.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert response.status_code == 503
    finally:
        guard.cancel()
        holder.rollback()
        holder.close()
    assert second_timeout() == own  # put back


def test_a_retry_keeps_a_job_in_its_database(two_databases: None) -> None:
    dead = dead_letter_on_second()
    with pytest.raises(awa.InvalidJob, match="lives in database 'default'") as refused:
        awa.dlq.retry(dead, queue="default", database="second")
    assert refused.value.field == "queue"
    with pytest.raises(awa.InvalidJob):
        awa.dlq.retry_bulk(queue="video", to_queue="default")
    with pytest.raises(awa.InvalidJob):
        actions.retry(dead, queue="email", database="second")
    with pytest.raises(CommandError, match=r"^--to-queue: queue 'default' lives in database"):
        call_command("awa_dlq", "retry", str(dead), "--to-queue", "default", "--database", "second")
    with pytest.raises(CommandError, match=r"^--to-queue"):
        call_command(
            "awa_jobs", "retry", str(dead), "--to-queue", "default", "--database", "second"
        )
    assert state_in("second", dead) == "dlq"  # nothing moved


def test_the_admin_refuses_a_bulk_retry_to_another_databases_queue(operator: Client) -> None:
    dead = dead_letter_on_second()
    response = operator.post(
        f"{ADMIN}/deadletter/act-matching/?database=second",
        {"action": "retry", "queue": "video", "to_queue": "default", "confirmed": "on"},
        follow=True,
    )
    assert response.status_code == 200
    shown = [str(m) for m in response.context["messages"]]
    assert any("lives in database 'default'" in m for m in shown), shown
    assert state_in("second", dead) == "dlq"
