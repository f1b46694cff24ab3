"""A process's periodic session lock tries (awa_django/core/session_tries.py, #37): the leader
lock and every queue's candidate lock in one statement per tick, on an interval that grows with
the live processes that compete for them, and a dead holder still replaced."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection

from awa_django.core import session_tries
from awa_django.core.session_tries import FLEET_TRY_S, MAX_INTERVAL_S, SessionTries
from awa_django.maintenance.leader import LEADER_LOCK_KEY, LeaderElector
from awa_django.ops.descriptors import Declarations
from awa_django.storage import control
from awa_django.storage import wake as wake_storage
from awa_django.storage.connections import connect
from awa_django.storage.runtime import RuntimeSnapshot, write_snapshot
from awa_django.storage.session import SharedSession
from awa_django.storage.statement import run_async
from awa_django.worker import wake
from awa_django.worker.wake import IdleWait, WakeLocks, WakeState
from tests.maintenance.test_leader import terminate_backend, wait_for

QUEUES = ("alpha", "beta")


def test_the_interval_grows_with_the_peers_between_the_base_and_the_cap() -> None:
    tries = SessionTries(SharedSession(lambda: connect("default")), base_s=4.0)
    assert tries.interval_s == 4.0  # one process: today's base
    tries.set_peers(0)
    assert tries.peers == 1 and tries.interval_s == 4.0
    tries.set_peers(100)
    # The fleet's tries stay at about one per FLEET_TRY_S: 100 processes, each every 25 s.
    assert tries.interval_s == pytest.approx(100 * FLEET_TRY_S)
    tries.set_peers(100_000)
    assert tries.interval_s == MAX_INTERVAL_S


@pytest.mark.usefixtures("awa_db")
def test_one_statement_a_tick_tries_the_leader_and_every_taken_queue_and_a_dead_holder_is_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: dict[str, int] = {"arm_wake": 0, "try_leader_lock": 0, "try_session_locks": 0}

    def counting(module: Any, name: str) -> None:
        original = getattr(module, name)

        # A statement is built once for each time it runs.
        def counted(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    counting(wake.storage, "arm_wake")
    counting(control, "try_leader_lock")
    counting(session_tries.storage, "try_session_locks")

    async def scenario() -> None:
        stopping = asyncio.Event()
        # The holder: the leader and both queues' candidate, on a session of its own.
        holder = SharedSession(lambda: connect("default"))
        async with holder.use() as conn:
            assert await run_async(conn, control.try_leader_lock(key=LEADER_LOCK_KEY))
            for queue in QUEUES:
                assert (
                    await run_async(conn, wake_storage.arm_wake(queue=queue, candidate=False))
                    == "armed"
                )
        calls.update(dict.fromkeys(calls, 0))

        # The other process: an elector and two queues' dispatchers that find the queues taken.
        session = SharedSession(lambda: connect("default"), listen=("awa",))
        await session.start()
        tries = SessionTries(session, base_s=0.1)
        elector = LeaderElector(session, retry_interval_s=0.05, tries=tries)
        locks = WakeLocks(session, tries=tries)
        waits = {q: IdleWait(q, locks, poll_interval_s=0.025) for q in QUEUES}
        wakeups = {q: asyncio.Event() for q in QUEUES}
        await tries.start()
        sleeps = {q: asyncio.create_task(waits[q].sleep(wakeups[q], stopping)) for q in QUEUES}
        elector_task = asyncio.create_task(elector.run(stopping))
        await asyncio.sleep(1.0)
        # Each dispatcher tried arm_wake once (taken); from then on only the tries: one
        # statement a tick for the leader lock and both candidate locks, a tick every 0.125 to
        # 0.25 s (FLEET_TRY_S with one process), where on their own schedules each queue
        # tried every 4 poll intervals (0.1 s) and the elector every 2 of its (0.1 s): 30.
        assert calls["arm_wake"] == 2 and calls["try_leader_lock"] == 0, calls
        assert 3 <= calls["try_session_locks"] <= 9, calls
        assert not elector.is_leader and not any(s.done() for s in sleeps.values())

        # The holder dies without giving anything back: one tick later this process leads
        # and is both queues' candidate, and their dispatchers claim.
        pid = holder.backend_pid
        await asyncio.to_thread(terminate_backend, pid)
        await wait_for(lambda: elector.is_leader and all(s.done() for s in sleeps.values()), 2.0)
        assert not any(w.is_set() for w in wakeups.values())  # no notification: the tries
        for queue in QUEUES:
            assert await locks.arm(queue) is WakeState.ARMED
            assert locks.holds(queue)
        stopping.set()
        await elector_task
        await tries.stop()
        await locks.close()
        await session.stop()
        await holder.close()

    asyncio.run(scenario())


@pytest.mark.usefixtures("awa_db")
def test_a_candidate_lock_won_for_a_dispatcher_that_stopped_waiting_goes_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> None:
        session = SharedSession(lambda: connect("default"), listen=("awa",))
        await session.start()
        tries = SessionTries(session, base_s=0.1)
        locks = WakeLocks(session, tries=tries)
        original = session_tries.storage.try_session_locks

        def racing(*, leader_key: int | None, queues: list[str]) -> Any:
            # The dispatcher is woken (and stops waiting) while the tick is in flight.
            tries.stop_waiting("alpha")
            return original(leader_key=leader_key, queues=queues)

        monkeypatch.setattr(session_tries.storage, "try_session_locks", racing)
        won: list[str] = []
        tries.wait_candidate("alpha", lambda: won.append("alpha"))
        await tries.tick()
        assert not won and not locks.holds("alpha")
        await asyncio.sleep(0.2)  # the release runs in the background
        # The lock went back: another session becomes the candidate at once.
        other = SharedSession(lambda: connect("default"))
        async with other.use() as conn:
            assert (
                await run_async(conn, wake_storage.arm_wake(queue="alpha", candidate=False))
                == "armed"
            )
        await other.close()
        await locks.close()
        await session.stop()

    asyncio.run(scenario())


@pytest.mark.usefixtures("awa_db")
def test_the_snapshot_counts_the_live_processes_that_compete_for_each_role() -> None:
    def add(instance_id: str, queues: str, age_s: float) -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO awa.runtime_instances (instance_id, hostname, pid, version,"
                " started_at, last_seen_at, queues, in_flight, is_leader, healthy,"
                " shutting_down, queue_hashes, kind_hashes) VALUES (%s, 'test', 1, 'test',"
                " now(), now() - make_interval(secs => %s), %s::jsonb, 0, false, true, false,"
                " '{}', '{}')",
                [instance_id, age_s, queues],
            )

    for n in range(6):
        add(f"busy-{n}", '{"alpha": 1}', 0)
    add("rare-1", '{"alpha": 1, "beta": 1}', 0)
    add("gone", '{"alpha": 1, "beta": 1}', 100)  # silent for longer than fresh_s
    add("me", '{"beta": 1}', 0)  # this process's own row: counted once, as itself

    async def snapshot(queues: dict[str, int]) -> int:
        me = RuntimeSnapshot(
            instance_id="me",
            hostname="test",
            pid=1,
            version="test",
            started_at=datetime.now(UTC),
            queues=queues,
            in_flight=0,
            is_leader=False,
            healthy=True,
            shutting_down=False,
        )
        conn = await connect("default")
        try:
            report = await run_async(
                conn, write_snapshot(me, Declarations(), fresh_s=30, publish=False)
            )
            return report.peers
        finally:
            await conn.close()

    # Everyone competes for the leader lock: 7 live processes and this one.
    assert asyncio.run(snapshot({})) == 8
    assert asyncio.run(snapshot({"alpha": 1})) == 8
    # Only one other live process serves beta: the fewest sets the interval.
    assert asyncio.run(snapshot({"alpha": 1, "beta": 1})) == 2
    assert asyncio.run(snapshot({"delta": 1})) == 1  # nobody else: at least itself


@pytest.mark.usefixtures("awa_db")
def test_the_tries_statement_is_prepared_at_its_first_run() -> None:
    """#37: a process tries every few seconds to a minute; at psycopg's threshold (a fifth run
    on the connection) the server planned its tries on every run for the process's first
    minutes."""

    async def main() -> list[str]:
        conn = await connect("default")
        try:
            await run_async(conn, wake_storage.try_session_locks(leader_key=None, queues=["q"]))
            cursor = await conn.execute("SELECT statement FROM pg_prepared_statements")
            return [str(row[0]) for row in await cursor.fetchall()]
        finally:
            await conn.close()

    prepared = asyncio.run(main())
    assert len(prepared) == 1 and "pg_try_advisory_lock" in prepared[0], prepared
