"""The shared session connection (awa_django/storage/session.py) on a real server: statements
interrupt its LISTEN wait without losing notifications, and a lost connection resets what
its users held."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from awa_django.storage.connections import connect, connection_kwargs
from awa_django.storage.session import SharedSession

pytestmark = pytest.mark.usefixtures("awa_db")


async def notify(payload: str) -> None:
    async with await psycopg.AsyncConnection.connect(
        **connection_kwargs("default"), autocommit=True
    ) as conn:
        await conn.execute("SELECT pg_notify('awa_test', %s)", [payload])


def test_statements_and_notifications_share_one_connection():
    async def scenario() -> None:
        received: list[str] = []
        session = SharedSession(
            lambda: connect("default"),
            listen=("awa_test",),
            on_notify=lambda channel, payload: received.append(payload),
        )
        stopping = asyncio.Event()
        listener = asyncio.create_task(session.run(stopping))
        await asyncio.wait_for(session.listening.wait(), 10)
        pid = session.backend_pid

        await notify("idle")
        # A statement does not wait for a notification to end the listener's wait.
        async with asyncio.timeout(2):
            async with session.use() as conn:
                await notify("during")  # arrives while this caller has the connection
                await conn.execute("SELECT pg_sleep(0.05)")
                assert conn.info.backend_pid == pid
        await notify("after")
        async with asyncio.timeout(5):
            while received != ["idle", "during", "after"]:
                await asyncio.sleep(0.01)
        assert session.backend_pid == pid and session.generation == 1

        stopping.set()
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)
        await session.close()

    asyncio.run(scenario())


def test_a_lost_connection_resets_its_users_and_comes_back():
    async def scenario() -> None:
        resets: list[int] = []
        session = SharedSession(lambda: connect("default"), listen=("awa_test",))
        session.on_reset(lambda: resets.append(session.generation))
        stopping = asyncio.Event()
        listener = asyncio.create_task(session.run(stopping))
        await asyncio.wait_for(session.listening.wait(), 10)
        first = session.backend_pid

        async with await psycopg.AsyncConnection.connect(
            **connection_kwargs("default"), autocommit=True
        ) as other:
            await other.execute("SELECT pg_terminate_backend(%s)", [first])
        async with asyncio.timeout(10):
            while session.generation < 2 or not session.listening.is_set():
                await asyncio.sleep(0.02)
        assert resets == [1] and session.backend_pid not in (None, first)

        stopping.set()
        listener.cancel()
        await asyncio.gather(listener, return_exceptions=True)
        await session.close()

    asyncio.run(scenario())
