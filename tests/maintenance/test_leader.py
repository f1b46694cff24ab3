"""Leader election: one holder at a time; a dead leader's lock passes to another process."""

from __future__ import annotations

import asyncio

import pytest
from django.db import connection

from awa_django.maintenance.leader import LeaderElector
from awa_django.storage.connections import connect
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
        first = LeaderElector(SharedSession(lambda: connect("default")), retry_interval_s=0.05)
        second = LeaderElector(SharedSession(lambda: connect("default")), retry_interval_s=0.05)
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

    asyncio.run(scenario())


def terminate_backend(pid: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    connection.close()


def test_stop_releases_leadership_at_once():
    async def scenario() -> None:
        stop_first = asyncio.Event()
        stop_second = asyncio.Event()
        first = LeaderElector(SharedSession(lambda: connect("default")), retry_interval_s=0.05)
        second = LeaderElector(SharedSession(lambda: connect("default")), retry_interval_s=0.05)
        first_task = asyncio.create_task(first.run(stop_first))
        await wait_for(lambda: first.is_leader)
        second_task = asyncio.create_task(second.run(stop_second))
        stop_first.set()
        await first_task
        await wait_for(lambda: second.is_leader, timeout=2)
        stop_second.set()
        await second_task

    asyncio.run(scenario())
