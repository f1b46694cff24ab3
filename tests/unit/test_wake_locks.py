"""``WakeLocks`` when the session connection is lost while a dispatcher waits, without a
database: the locks taken on the connection that went are not believed held."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from awa_django.storage.session import SharedSession
from awa_django.worker import wake
from awa_django.worker.wake import WakeLocks, WakeState


class Connection:
    closed = False

    async def execute(self, statement: str) -> None:
        pass

    async def close(self) -> None:
        self.closed = True


def test_locks_taken_on_a_lost_connection_are_not_believed_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def main() -> None:
        opened: list[Connection] = []

        async def connect() -> Any:
            opened.append(Connection())
            return opened[-1]

        def arm_wake(*, queue: str, candidate: bool) -> str:
            return "arm"

        released: list[Any] = []

        def release_wake(*, queue: str, armed: bool) -> str:
            return "release"

        # The statements' stand-ins, "run" on the stand-in connections.
        async def run_async(conn: Any, statement: str) -> str | None:
            if statement == "arm":
                return "armed"
            released.append(conn)
            return None

        monkeypatch.setattr(wake.storage, "arm_wake", arm_wake)
        monkeypatch.setattr(wake.storage, "release_wake", release_wake)
        monkeypatch.setattr(wake, "run_async", run_async)
        session = SharedSession(connect, listen=("awa",))
        locks = WakeLocks(session)
        # Not listening yet: a notification would reach no one.
        assert await locks.arm("default") is WakeState.UNAVAILABLE
        async with session.use():
            pass
        assert await locks.arm("default") is WakeState.ARMED
        assert locks.holds("default")

        # A statement fails: the session closes its connection, which held the locks.
        with pytest.raises(RuntimeError):
            async with session.use():
                raise RuntimeError("connection broke")
        assert opened[0].closed and not locks.holds("default")
        locks.release("default")  # holds nothing: no statement
        await asyncio.sleep(0)
        assert released == []

        # Taken again on a new connection.
        assert await locks.arm("default") is WakeState.UNAVAILABLE  # not listening meanwhile
        async with session.use():
            pass
        assert await locks.arm("default") is WakeState.ARMED
        assert locks.holds("default") and len(opened) == 2

    asyncio.run(main())
