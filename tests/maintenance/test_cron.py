"""Cron schedules against real PostgreSQL: sync, evaluation, missed-fire policies, leader races,
pause/resume/trigger/remove, system checks and the awa_cron command.

Evaluation passes are driven directly (``read_due`` / ``fire`` / ``run_once``) so races can be
interleaved step by step; tests/processes/test_cron_processes.py races real processes."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError, SystemCheckError
from django.db import connection
from django.test import override_settings

import awa_django as awa
from awa_django.conf import get_settings
from awa_django.declarations.cron import (
    Declaration,
    declarations,
    declared_schedules,
    schedule_problems,
)
from awa_django.declarations.jobs import DeclaredJob, registry
from awa_django.exceptions import ConfigError
from awa_django.maintenance.cron_evaluator import CronConfig, CronEvaluator
from awa_django.ops.cron_publish import declared_schedule_rows
from awa_django.signals import job_enqueued
from awa_django.storage.connections import connect, open_pool
from awa_django.storage.cron import sync_cron_jobs
from awa_django.storage.statement import run_async
from awa_django.worker.process import WorkerProcess, config_from_settings
from tests.conftest import BackgroundWorker, wait_until
from tests.jobs import echo, exact_repr, record

pytestmark = pytest.mark.usefixtures("awa_db")


@contextmanager
def declared(**options: Any) -> Iterator[Declaration]:
    """An ``@awa.periodic`` declaration on tests.record for the duration of a test."""
    options.setdefault("schedule", "*/5 * * * *")
    options.setdefault("name", "tests.every_five")
    declaration = Declaration(origin="test", job=record, **options)
    declarations.add(declaration)
    try:
        yield declaration
    finally:
        declarations.remove(declaration)


def sync(*schedules: awa.cron.Schedule) -> None:
    async def main() -> None:
        async with await connect("default") as conn:
            await run_async(conn, sync_cron_jobs([s.as_row() for s in schedules]))

    asyncio.run(main())


def store(**options: Any) -> awa.cron.Schedule:
    """Declare, resolve and sync one schedule; returns it."""
    with declared(**options):
        (schedule,) = [s for s in declared_schedules() if s.name == options["name"]]
    sync(schedule)
    return schedule


def sql(statement: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def age_schedule(name: str, minutes: int) -> None:
    """Pretend the schedule was created ``minutes`` whole minutes before the current minute
    began, so a minutely schedule owes exactly ``minutes`` ticks (and never fired since)."""
    sql(
        "UPDATE awa.cron_jobs SET created_at = date_trunc('minute', now()) "
        "- make_interval(mins => %s) WHERE name = %s",
        [minutes, name],
    )


def cron_jobs(name: str | None = None) -> list[dict[str, Any]]:
    """Enqueued jobs fired by cron: their id and the tick they were fired for."""
    rows = sql("SELECT job_id, metadata FROM awa.jobs WHERE metadata ? 'awa_cron' ORDER BY job_id")
    found = []
    for job_id, metadata in rows:
        meta = json.loads(metadata) if isinstance(metadata, str) else metadata
        if name is None or meta["awa_cron"]["name"] == name:
            found.append({"job_id": job_id, **meta["awa_cron"]})
    return found


async def _with_evaluators(count: int, scenario: Any, max_catch_up: int = 100) -> Any:
    pools = [await open_pool("default", max_size=2) for _ in range(count)]
    try:
        evaluators = [
            CronEvaluator(pool, CronConfig(interval_s=1, max_catch_up=max_catch_up))
            for pool in pools
        ]
        return await scenario(*evaluators)
    finally:
        for pool in pools:
            await pool.close()


def evaluate(scenario: Any, *, count: int = 1, max_catch_up: int = 100) -> Any:
    return asyncio.run(_with_evaluators(count, scenario, max_catch_up))


def run_once() -> Any:
    async def scenario(evaluator: CronEvaluator) -> Any:
        return await evaluator.run_once()

    return evaluate(scenario)


# -- declaration and sync ---------------------------------------------------------------------


def test_periodic_decorator_registers_the_job_and_resolves_defaults():
    @awa.periodic("0 3 * * *", timezone="Europe/Paris", args={"n": 7})
    @awa.job(kind="tests.nightly", queue="email")
    def nightly(ctx: awa.JobContext, n: int = 0) -> None:
        return None

    try:
        (schedule,) = [s for s in declared_schedules() if s.name == "tests.nightly"]
        assert schedule.kind == "tests.nightly"
        assert schedule.queue == "email"
        assert schedule.args == {"n": 7}
        assert schedule.timezone == "Europe/Paris"
        assert schedule.missed_fire_policy == "coalesce"
    finally:
        for declaration in list(declarations):
            if declaration.job is nightly:
                declarations.remove(declaration)
        registry.unregister(nightly)


def test_sync_is_additive_and_keeps_fire_history_and_pause():
    store(name="tests.a")
    sql("UPDATE awa.cron_jobs SET last_fire_at = now(), paused_at = now() WHERE name = 'tests.a'")
    # Another deployment declares only tests.b: tests.a stays, with its history.
    store(name="tests.b", schedule="0 * * * *")
    rows = {s.name: s for s in awa.cron.list()}
    assert set(rows) == {"tests.a", "tests.b"}
    assert rows["tests.a"].last_fire_at is not None and rows["tests.a"].paused_at is not None
    # Re-declaring tests.a with a new expression updates its definition, not its history.
    store(name="tests.a", schedule="*/10 * * * *", args={"n": 3})
    updated = {s.name: s for s in awa.cron.list()}["tests.a"]
    assert updated.cron_expr == "*/10 * * * *" and updated.args == {"n": 3}
    assert updated.last_fire_at == rows["tests.a"].last_fire_at
    assert updated.paused_at == rows["tests.a"].paused_at


def test_unchanged_resync_writes_nothing():
    schedule = store(name="tests.same")
    (before,) = sql("SELECT xmin::text FROM awa.cron_jobs WHERE name = 'tests.same'")
    sync(schedule)
    assert sql("SELECT xmin::text FROM awa.cron_jobs WHERE name = 'tests.same'") == [before]


def test_schedule_arguments_and_metadata_keep_their_floats():
    args, metadata = {"big": 1e16, "nested": [2.5e20]}, {"rate": 1e300}
    declaration = Declaration(
        origin="test",
        job=echo,
        name="tests.floats",
        schedule="0 0 1 1 *",
        args=args,
        metadata=metadata,
    )
    declarations.add(declaration)
    try:
        (schedule,) = [s for s in declared_schedules() if s.name == "tests.floats"]
    finally:
        declarations.remove(declaration)
    sync(schedule)
    (row,) = awa.cron.list()
    assert exact_repr(row.args) == exact_repr(args)
    assert exact_repr(row.metadata) == exact_repr(metadata)
    (before,) = sql("SELECT xmin::text FROM awa.cron_jobs WHERE name = 'tests.floats'")
    sync(schedule)  # the stored row equals the declared one: nothing to write
    assert sql("SELECT xmin::text FROM awa.cron_jobs WHERE name = 'tests.floats'") == [before]
    job = awa.get_job(awa.cron.trigger("tests.floats"))
    assert exact_repr(job.args) == exact_repr(args)
    assert job.metadata["rate"] == 1e300 and type(job.metadata["rate"]) is float


def test_worker_start_syncs_declared_schedules():
    with declared(name="tests.from_worker", schedule="*/7 * * * *"):
        BackgroundWorker(queues={}).start().stop()
    (row,) = [s for s in awa.cron.list() if s.name == "tests.from_worker"]
    assert (row.name, row.cron_expr, row.kind) == (
        "tests.from_worker",
        "*/7 * * * *",
        "tests.record",
    )


def test_settings_declarations_are_synced_too():
    entry = {"name": "tests.settings", "schedule": "0 0 * * *", "job": "tests.record"}
    with override_settings(AWA={"QUEUES": {"default": {}}, "CRON": [entry]}):
        (schedule,) = [s for s in declared_schedules() if s.name == "tests.settings"]
    assert schedule.queue == "default"


# -- evaluation and missed-fire policies ------------------------------------------------------


def test_coalesce_enqueues_one_job_for_the_newest_missed_tick():
    store(name="tests.coalesce", schedule="* * * * *")
    age_schedule("tests.coalesce", 10)
    result = run_once()
    assert result.enqueued == 1
    (fired,) = cron_jobs("tests.coalesce")
    assert awa.get_job(fired["job_id"]).kind == "tests.record"
    assert run_once().enqueued == 0


def test_catch_up_enqueues_each_missed_tick_once_oldest_first():
    store(name="tests.catch_up", schedule="* * * * *", missed="catch_up")
    age_schedule("tests.catch_up", 10)
    assert run_once().enqueued == 10
    assert run_once().enqueued == 0
    fired = cron_jobs("tests.catch_up")
    ticks = [datetime.fromisoformat(f["fire_at"]) for f in fired]
    assert len(set(ticks)) == 10
    assert ticks == sorted(ticks)
    assert all(b - a == timedelta(minutes=1) for a, b in itertools.pairwise(ticks))


def test_catch_up_is_capped():
    store(name="tests.capped", schedule="* * * * *", missed="catch_up")
    age_schedule("tests.capped", 60)

    async def scenario(evaluator: CronEvaluator) -> Any:
        return await evaluator.run_once()

    assert evaluate(scenario, max_catch_up=5).enqueued == 5


def test_a_new_schedule_waits_for_its_first_tick():
    store(name="tests.fresh", schedule="0 0 1 1 *")
    assert run_once().enqueued == 0
    assert cron_jobs() == []


def test_fired_jobs_carry_the_schedule_template():
    store(name="tests.template", schedule="* * * * *", args={"n": 42}, priority=1, tags=["cron"])
    age_schedule("tests.template", 1)
    run_once()
    (fired,) = cron_jobs("tests.template")
    job = awa.get_job(fired["job_id"])
    assert (job.args, job.priority, job.tags, job.state) == ({"n": 42}, 1, ["cron"], "available")


# -- leader races ------------------------------------------------------------------------------


def test_two_leaders_reading_the_same_tick_enqueue_it_once():
    store(name="tests.race", schedule="* * * * *", missed="catch_up")
    age_schedule("tests.race", 5)

    async def scenario(old: CronEvaluator, new: CronEvaluator) -> Any:
        (seen_by_old,) = await old.read_due()
        (seen_by_new,) = await new.read_due()
        first = await new.fire(seen_by_new)
        # The deposed leader finishes its pass late, with what it read before.
        second = await old.fire(seen_by_old)
        return first, second

    first, second = evaluate(scenario, count=2)
    assert len(first.job_ids) == 5 and second.job_ids == ()
    assert len(cron_jobs("tests.race")) == 5


def test_failover_mid_evaluation_fires_each_tick_exactly_once():
    """The old leader is blocked inside its fire, its session dies (failover), the new leader
    reads the same row and fires: every tick is enqueued once, none is lost."""
    store(name="tests.failover", schedule="* * * * *", missed="catch_up")
    age_schedule("tests.failover", 3)

    async def scenario(old: CronEvaluator, new: CronEvaluator) -> Any:
        async with await connect("default") as blocker:
            async with blocker.transaction():
                await blocker.execute(
                    "SELECT 1 FROM awa.cron_jobs WHERE name = 'tests.failover' FOR UPDATE"
                )
                (seen_by_old,) = await old.read_due()
                old_fire = asyncio.create_task(old.fire(seen_by_old))
                pid = await _wait_for_blocked_fire(blocker)
                await blocker.execute("SELECT pg_terminate_backend(%s)", [pid])
                with pytest.raises(Exception):  # noqa: B017 - the session is gone
                    await old_fire
                (seen_by_new,) = await new.read_due()
                new_fire = asyncio.create_task(new.fire(seen_by_new))
                await _wait_for_blocked_fire(blocker)
            return await new_fire

    assert len(evaluate(scenario, count=2).job_ids) == 3
    ticks = [f["fire_at"] for f in cron_jobs("tests.failover")]
    assert len(ticks) == 3 == len(set(ticks))


def test_two_fires_blocked_on_the_same_schedule_resolve_to_one():
    store(name="tests.blocked", schedule="* * * * *", missed="catch_up")
    age_schedule("tests.blocked", 2)

    async def scenario(a: CronEvaluator, b: CronEvaluator) -> Any:
        async with await connect("default") as blocker:
            async with blocker.transaction():
                await blocker.execute(
                    "SELECT 1 FROM awa.cron_jobs WHERE name = 'tests.blocked' FOR UPDATE"
                )
                (seen_a,) = await a.read_due()
                (seen_b,) = await b.read_due()
                fires = [asyncio.create_task(a.fire(seen_a)), asyncio.create_task(b.fire(seen_b))]
                await _wait_for_blocked_fire(blocker, count=2)
            return await asyncio.gather(*fires)

    results = evaluate(scenario, count=2)
    assert sorted(len(r.job_ids) for r in results) == [0, 2]
    assert len(cron_jobs("tests.blocked")) == 2


async def _wait_for_blocked_fire(conn: Any, count: int = 1) -> int:
    """The pid of the newest backend waiting for a lock (behind ``conn``'s), once ``count``
    wait."""
    for _ in range(500):
        cursor = await conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' ORDER BY backend_start"
        )
        pids = [row[0] for row in await cursor.fetchall()]
        if len(pids) >= count:
            return int(pids[-1])
        await asyncio.sleep(0.02)
    raise AssertionError("no fire blocked on the schedule lock")


# -- pause, resume, trigger, remove --------------------------------------------------------------


def test_paused_schedule_does_not_fire():
    store(name="tests.paused", schedule="* * * * *")
    age_schedule("tests.paused", 3)
    assert awa.cron.pause("tests.paused")
    assert not awa.cron.pause("tests.paused")
    assert run_once().enqueued == 0
    assert cron_jobs() == []


def test_a_pause_between_read_and_fire_wins():
    store(name="tests.pause_race", schedule="* * * * *", missed="catch_up")
    age_schedule("tests.pause_race", 3)

    async def scenario(leader: CronEvaluator) -> Any:
        (seen,) = await leader.read_due()
        assert seen.name == "tests.pause_race"
        await asyncio.to_thread(awa.cron.pause, "tests.pause_race")
        return await leader.fire(seen)

    assert evaluate(scenario).job_ids == ()
    assert cron_jobs() == []


def test_pause_and_resume_between_read_and_fire_still_skips_the_paused_ticks():
    store(name="tests.flap", schedule="* * * * *", missed="catch_up")
    age_schedule("tests.flap", 3)

    async def scenario(leader: CronEvaluator) -> Any:
        (seen,) = await leader.read_due()
        await asyncio.to_thread(awa.cron.pause, "tests.flap")
        await asyncio.to_thread(awa.cron.resume, "tests.flap")
        return await leader.fire(seen)

    assert evaluate(scenario).job_ids == ()
    # Resumed just now: the ticks that fell before the resume are not owed.
    assert run_once().enqueued == 0


def test_resume_fires_again_from_the_next_tick():
    store(name="tests.resumed", schedule="* * * * *", missed="catch_up")
    awa.cron.pause("tests.resumed")
    assert awa.cron.resume("tests.resumed")
    assert not awa.cron.resume("tests.resumed")
    # Pretend the resume happened just after the minute began two minutes ago: only the two
    # ticks since then are owed.
    age_schedule("tests.resumed", 30)
    sql(
        "UPDATE awa.cron_jobs "
        "SET resumed_at = date_trunc('minute', now()) - interval '2 minutes' + interval '1 second'"
    )
    assert run_once().enqueued == 2


def test_trigger_enqueues_now_without_touching_the_timetable():
    store(name="tests.trigger", schedule="0 0 1 1 *", args={"n": 5})
    awa.cron.pause("tests.trigger")
    job_id = awa.cron.trigger("tests.trigger")
    assert job_id is not None
    job = awa.get_job(job_id)
    assert job.args == {"n": 5} and job.metadata["awa_cron"]["triggered"] is True
    (row,) = awa.cron.list()
    assert row.last_fire_at is None
    assert awa.cron.trigger("tests.missing") is None


def record_signal(sender: Any, **kwargs: Any) -> None:
    received_signals.append({"sender": sender, **kwargs})


def failing_receiver(sender: Any, **kwargs: Any) -> None:
    raise RuntimeError("a broken receiver must not stop the leader's fire")


received_signals: list[dict[str, Any]] = []


@contextmanager
def connected(*receivers: Any) -> Iterator[None]:
    received_signals.clear()
    for receiver in receivers:
        job_enqueued.connect(receiver)
    try:
        yield
    finally:
        for receiver in receivers:
            job_enqueued.disconnect(receiver)


def test_fired_and_triggered_jobs_are_announced_like_any_enqueue():
    store(name="tests.announced", schedule="* * * * *", missed="catch_up")
    age_schedule("tests.announced", 3)
    with connected(failing_receiver, record_signal):
        assert run_once().enqueued == 3
        assert run_once().enqueued == 0  # nothing due: nothing announced
    fired = [f["job_id"] for f in cron_jobs("tests.announced")]
    assert received_signals == [
        {
            "signal": job_enqueued,
            "sender": DeclaredJob,
            "job_ids": fired,
            "kind": "tests.record",
            "queue": "default",
        }
    ]
    with connected(record_signal):
        triggered = awa.cron.trigger("tests.announced")
        assert awa.cron.trigger("tests.missing") is None
    assert [(r["job_ids"], r["kind"], r["queue"]) for r in received_signals] == [
        ([triggered], "tests.record", "default")
    ]


def test_remove_deletes_only_that_schedule():
    store(name="tests.keep")
    store(name="tests.drop")
    assert awa.cron.remove("tests.drop")
    assert not awa.cron.remove("tests.drop")
    assert [s.name for s in awa.cron.list()] == ["tests.keep"]


# -- checks and the command ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "check_id"),
    [
        ({"schedule": "61 * * * *"}, "awa.E030"),
        ({"schedule": "* * *"}, "awa.E030"),
        ({"timezone": "Nowhere/Atlantis"}, "awa.E031"),
        ({"missed": "sometimes"}, "awa.E032"),
        ({"queue": "undeclared"}, "awa.E032"),
        ({"args": {"unknown": 1}}, "awa.E032"),
        ({"priority": 9}, "awa.E032"),
    ],
)
def test_invalid_declaration_fails_manage_py_check(options, check_id):
    with declared(**options), pytest.raises(SystemCheckError, match=check_id.replace(".", r"\.")):
        call_command("check")


def test_invalid_declaration_stops_the_worker_from_starting():
    config = config_from_settings(get_settings(), queues={})
    with declared(schedule="61 * * * *"), pytest.raises(awa.ConfigError, match=r"awa\.E030"):
        asyncio.run(WorkerProcess(config, registry.get).run())


def test_duplicate_names_fail_the_check():
    with (
        declared(name="tests.twice"),
        declared(name="tests.twice", schedule="0 * * * *"),
        pytest.raises(SystemCheckError, match=r"awa\.E033"),
    ):
        call_command("check")


@pytest.mark.parametrize(
    "cron",
    [
        "not a list",
        [{"name": "x", "schedule": "* * * * *"}],
        [{"name": "x", "schedule": "* * * * *", "job": "tests.record", "every": 5}],
        [{"name": "x", "schedule": "* * * * * * * *", "job": "tests.record"}],
    ],
)
def test_invalid_settings_entries_fail_the_check(cron):
    with (
        override_settings(AWA={"QUEUES": {"default": {}}, "CRON": cron}),
        pytest.raises(SystemCheckError, match=r"awa\.E03[04]"),
    ):
        call_command("check")


def test_a_settings_entry_naming_no_registered_job_fails_the_check_with_the_nearest():
    entry = {"name": "typo", "schedule": "0 * * * *", "job": "tests.recrod"}
    with override_settings(AWA={"QUEUES": {"default": {}}, "CRON": [entry]}):
        (problem,) = [p for p in schedule_problems() if "recrod" in str(p)]
        assert problem.check_id == "awa.E032"
        message = str(problem)
        assert message.startswith("AWA['CRON'][0]: kind 'tests.recrod' has no handler")
        assert "Did you mean 'tests.record'?" in message and "AWA['JOB_MODULES']" in message
        with pytest.raises(SystemCheckError, match=r"awa\.E032"):
            call_command("check")
        # A worker would fire it every tick, each job failing: it refuses to start instead.
        with pytest.raises(ConfigError, match=r"tests\.recrod"):
            declared_schedule_rows()
    # Another service's kind is listed as such.
    external = {"QUEUES": {"default": {}}, "CRON": [entry], "EXTERNAL_KINDS": ["tests.recrod"]}
    with override_settings(AWA=external):
        assert [s.kind for s in declared_schedules() if s.name == "typo"] == ["tests.recrod"]


def test_valid_declarations_pass_the_check():
    with declared(schedule="*/15 * * * * *", timezone="America/New_York", missed="catch_up"):
        call_command("check")


def test_awa_cron_command():
    store(name="tests.cmd", schedule="*/5 * * * *")

    def cmd(*args: str) -> str:
        out = StringIO()
        call_command("awa_cron", *args, stdout=out)
        return out.getvalue()

    assert "tests.cmd\t*/5 * * * * (UTC)\ttests.record -> default\tcoalesce\tactive" in cmd("list")
    assert cmd("pause", "tests.cmd") == "paused tests.cmd\n"
    assert "paused since" in cmd("list")
    with pytest.raises(CommandError, match="already paused"):
        cmd("pause", "tests.cmd")
    assert cmd("resume", "tests.cmd") == "resumed tests.cmd\n"
    job_id = int(cmd("trigger", "tests.cmd").split()[2])
    assert awa.get_job(job_id).kind == "tests.record"
    assert cmd("remove", "tests.cmd") == "removed tests.cmd\n"
    assert cmd("list") == "no cron schedules\n"
    with pytest.raises(CommandError, match="no cron schedule"):
        cmd("trigger", "tests.cmd")


def test_leader_fires_due_schedules_in_a_running_worker():
    store(name="tests.live", schedule="* * * * * *")
    with override_settings(
        AWA={"QUEUES": {"default": {}}, "CRON_INTERVAL_S": 0.1, "LEADER_ELECTION_INTERVAL_S": 0.1}
    ):
        worker = BackgroundWorker(queues={}).start()
        try:
            wait_until(lambda: len(cron_jobs("tests.live")) >= 2, timeout=20)
        finally:
            worker.stop()


def test_a_stored_schedule_this_process_cannot_parse_is_skipped_and_reported_once(caplog):
    store(name="tests.good", schedule="* * * * *")
    age_schedule("tests.good", 1)
    sql(
        "INSERT INTO awa.cron_jobs (name, cron_expr, timezone, kind, queue, args, priority, "
        "max_attempts, tags, metadata, missed_fire_policy) VALUES ('tests.alien', "
        "'every tuesday', 'UTC', 'tests.record', 'default', '{}', 2, 3, '{}', '{}', 'coalesce')"
    )
    age_schedule("tests.alien", 5)

    async def scenario(evaluator: CronEvaluator) -> Any:
        return [await evaluator.run_once(), await evaluator.run_once()]

    first, second = evaluate(scenario)
    assert (first.enqueued, second.enqueued) == (1, 0)
    reports = [r for r in caplog.records if "cannot be evaluated" in r.getMessage()]
    assert len(reports) == 1 and "tests.alien" in reports[0].getMessage()
