"""Leader election: one holder at a time; a dead leader's lock passes to another process."""

from __future__ import annotations

import asyncio

import pytest
from django.db import connection

from awa_django.maintenance.leader import LEASE_INTERVALS, LeaderElector, LeaseElector
from awa_django.storage.connections import connect, open_pool
from awa_django.storage.session import SharedSession

pytestmark = pytest.mark.usefixtures("awa_db")


async def wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def test_one_leader_and_takeover_when_its_session_dies():
    async def scenario() -> None:
        stopping = asyncio.Event()
        sessions = [SharedSession(lambda: connect("default")) for _ in range(2)]
        first = LeaderElector(sessions[0], retry_interval_s=0.05)
        second = LeaderElector(sessions[1], retry_interval_s=0.05)
        first_task = asyncio.create_task(first.run(stopping))
        await wait_for(lambda: first.is_leader)
        second_task = asyncio.create_task(second.run(stopping))
        await asyncio.sleep(0.3)
        assert first.is_leader and not second.is_leader

        # Kill the leader's session from outside, as a crashed process or network would.
        pid = first._session.backend_pid
        await asyncio.to_thread(terminate_backend, pid)
        await wait_for(lambda: second.is_leader)
        await wait_for(lambda: not first.is_leader)

        stopping.set()
        await asyncio.gather(first_task, second_task)
        assert not second.is_leader
        for session in sessions:
            await session.close()

    asyncio.run(scenario())


def test_a_process_that_is_not_the_leader_tries_every_few_intervals():
    """An idle fleet's lock tries (#37): the leader renews every interval, the others try only
    every NON_LEADER_TRY_INTERVALS intervals."""

    async def scenario() -> tuple[int, int]:
        stopping = asyncio.Event()
        sessions = [SharedSession(lambda: connect("default")) for _ in range(2)]
        electors = [LeaderElector(session, retry_interval_s=0.05) for session in sessions]
        ticks = [0, 0]
        for n, elector in enumerate(electors):
            tick = elector._tick

            async def counted(n: int = n, tick=tick) -> None:
                ticks[n] += 1
                await tick()

            elector._tick = counted
        first_task = asyncio.create_task(electors[0].run(stopping))
        await wait_for(lambda: electors[0].is_leader)
        second_task = asyncio.create_task(electors[1].run(stopping))
        await asyncio.sleep(0.05)
        ticks[:] = [0, 0]
        await asyncio.sleep(1.0)
        counted = tuple(ticks)
        assert electors[0].is_leader and not electors[1].is_leader
        stopping.set()
        await asyncio.gather(first_task, second_task)
        for session in sessions:
            await session.close()
        return counted

    leader_ticks, other_ticks = asyncio.run(scenario())
    # One second of 0.05 s intervals: ~20 renewals, but a try only every two intervals
    # (NON_LEADER_TRY_INTERVALS), ~10 (a loaded machine only stretches the intervals).
    assert other_ticks <= 12, (leader_ticks, other_ticks)
    assert leader_ticks > other_ticks, (leader_ticks, other_ticks)


def terminate_backend(pid: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    connection.close()


def test_stop_releases_leadership_at_once():
    async def scenario() -> None:
        stop_first = asyncio.Event()
        stop_second = asyncio.Event()
        sessions = [SharedSession(lambda: connect("default")) for _ in range(2)]
        first = LeaderElector(sessions[0], retry_interval_s=0.05)
        second = LeaderElector(sessions[1], retry_interval_s=0.05)
        first_task = asyncio.create_task(first.run(stop_first))
        await wait_for(lambda: first.is_leader)
        second_task = asyncio.create_task(second.run(stop_second))
        stop_first.set()
        await first_task
        await wait_for(lambda: second.is_leader, timeout=2)
        stop_second.set()
        await second_task
        for session in sessions:
            await session.close()

    asyncio.run(scenario())


def add_instance(instance_id: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.runtime_instances (instance_id, hostname, pid, version, started_at,"
            " queues, in_flight, is_leader, healthy, shutting_down, queue_hashes, kind_hashes)"
            " VALUES (%s, 'test', 1, 'test', now(), '{}', 0, false, true, false, '{}', '{}')",
            [instance_id],
        )


def test_the_lease_has_one_holder_passes_on_when_not_renewed_and_on_release():
    # Poll-only processes (AWA["WORKER_SESSION"] = False): no session, a lease row instead.
    for name in ("first", "second", "third"):
        add_instance(name)

    async def scenario() -> None:
        pool = await open_pool("default", max_size=1, prepare=False)
        stopping = asyncio.Event()
        first, second, third = (
            LeaseElector(pool, instance_id=name, retry_interval_s=0.1)
            for name in ("first", "second", "third")
        )
        first_task = asyncio.create_task(first.run(stopping))
        await wait_for(lambda: first.is_leader)
        second_task = asyncio.create_task(second.run(stopping))
        await asyncio.sleep(0.5)
        assert first.is_leader and not second.is_leader

        # The leader stops renewing, as a SIGKILLed process would (and gives nothing back): the
        # lease expires.
        async def gone() -> None:
            pass

        first._release = gone  # type: ignore[method-assign]
        first_task.cancel()
        await asyncio.gather(first_task, return_exceptions=True)
        started = asyncio.get_running_loop().time()
        await wait_for(lambda: second.is_leader, timeout=5)
        elapsed = asyncio.get_running_loop().time() - started
        assert LEASE_INTERVALS * 0.1 - 0.15 < elapsed < (LEASE_INTERVALS + 2) * 0.1

        # A stopping leader gives the lease back: the next candidate takes it at once.
        third_task = asyncio.create_task(third.run(stopping))
        await asyncio.sleep(0.3)
        assert not third.is_leader
        second_task.cancel()  # its run() gives the lease back on the way out
        await asyncio.gather(second_task, return_exceptions=True)
        await wait_for(lambda: third.is_leader, timeout=0.5)
        stopping.set()
        await third_task
        await pool.close()

    asyncio.run(scenario())
