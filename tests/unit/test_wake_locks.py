"""``WakeLocks`` when the LISTEN connection comes back while a dispatcher is arming, without a
database: the locks taken on the session being dropped are not believed held."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from awa_django.worker import wake
from awa_django.worker.wake import WakeLocks, WakeState


class Session:
    closed = False

    async def close(self) -> None:
        self.closed = True


def test_an_arm_that_ends_after_the_session_was_forgotten_holds_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def main() -> None:
        entered, answer = asyncio.Event(), asyncio.Event()
        sessions: list[Session] = []

        async def connect() -> Any:
            sessions.append(Session())
            return sessions[-1]

        async def arm_wake(conn: Any, *, queue: str, candidate: bool) -> str:
            entered.set()
            await answer.wait()
            return "armed"

        monkeypatch.setattr(wake.storage, "arm_wake", arm_wake)
        listening = asyncio.Event()
        listening.set()
        locks = WakeLocks(connect, listening=listening)
        arming = asyncio.create_task(locks.arm("default"))
        await entered.wait()
        locks.forget()  # the LISTEN connection came back: the server may have restarted
        answer.set()
        assert await arming is WakeState.UNAVAILABLE
        assert not locks.holds("default")
        await asyncio.sleep(0)
        assert sessions[0].closed
        # The next arm takes the locks again, on a new session.
        entered.clear()
        assert await locks.arm("default") is WakeState.ARMED
        assert locks.holds("default") and len(sessions) == 2

    asyncio.run(main())
