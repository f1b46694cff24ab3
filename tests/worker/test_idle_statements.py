"""What an idle worker sends the server (issue #37), piece by piece against a real server: a
process that is not its queue's waiting candidate does not claim at every poll interval (it
only tries the candidate lock, to find a candidate that died), and the runtime snapshot
publishes the process's declarations with one snapshot in DECLARATIONS_EVERY."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection
from psycopg import AsyncConnection, AsyncCursor

from awa_django.conf import get_settings
from awa_django.declarations.jobs import registry
from awa_django.ops.descriptors import declared
from awa_django.storage import connections
from awa_django.storage.connections import open_pool
from awa_django.storage.session import SharedSession
from awa_django.worker.reporter import DECLARATIONS_EVERY, RuntimeReporter
from awa_django.worker.wake import IdleWait, WakeLocks, WakeState

pytestmark = pytest.mark.usefixtures("awa_db")


async def listening_session() -> SharedSession:
    session = SharedSession(lambda: connections.connect("default"), listen=("awa",))
    async with session.use():
        pass  # opens the connection, which LISTENs
    return session


def test_a_worker_that_is_not_the_candidate_sleeps_past_the_poll_interval() -> None:
    async def main() -> None:
        first, second = await listening_session(), await listening_session()
        candidate, other = WakeLocks(first), WakeLocks(second)
        try:
            assert await candidate.arm("default") is WakeState.ARMED
            wait = IdleWait("default", other, poll_interval_s=0.05)
            wakeup, stopping = asyncio.Event(), asyncio.Event()
            tries = 0
            arm = other.arm

            async def counted_arm(queue: str) -> WakeState:
                nonlocal tries
                tries += 1
                return await arm(queue)

            other.arm = counted_arm
            sleeping = asyncio.create_task(wait.sleep(wakeup, stopping))
            await asyncio.sleep(1.0)
            # Twenty poll intervals, and no return to claim: the candidate waits for the queue.
            assert not sleeping.done()
            # And the candidate lock was tried only every four intervals (TAKEN_RETRY_POLLS), not
            # at each of the twenty (a loaded machine only stretches the intervals).
            assert tries <= 7, tries
            # The candidate stops waiting (as when it exits): the other takes its place at its
            # next try, and returns to claim once before it sleeps.
            await candidate.close()
            await asyncio.wait_for(sleeping, 2)
            assert other.holds("default")

            # A notification wakes a worker that is not the candidate at once.
            await other.close()
            assert await candidate.arm("default") is WakeState.ARMED
            sleeping = asyncio.create_task(wait.sleep(wakeup, stopping))
            await asyncio.sleep(0.1)
            assert not sleeping.done()
            wakeup.set()
            await asyncio.wait_for(sleeping, 1)
            assert not other.holds("default")
        finally:
            await candidate.close()
            await other.close()
            await first.close()
            await second.close()

    asyncio.run(main())


def stored_descriptors() -> int:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM awa.queue_descriptors")
            return int(cursor.fetchone()[0])
    finally:
        connection.close()  # this thread's connection


def test_snapshots_publish_the_declarations_once_in_a_while() -> None:
    async def main() -> list[int]:
        pool = await open_pool("default", max_size=1)
        reporter = RuntimeReporter(
            pool,
            instance_id="reporter-test",
            queues={"default": 1},
            declared=declared(get_settings(), registry.jobs()),
            interval_s=10,
            started_at=datetime.now(UTC),
            state=lambda: (0, False, True, False),
        )
        seen = []
        try:
            for _ in range(DECLARATIONS_EVERY + 1):
                await reporter.report_once()
                seen.append(await asyncio.to_thread(stored_descriptors))
                # Gone (as if cleaned up): only a snapshot that publishes writes them again.
                await asyncio.to_thread(delete_descriptors)
        finally:
            await pool.close()
        return seen

    seen = asyncio.run(main())
    assert seen[0] > 0
    assert seen[1:DECLARATIONS_EVERY] == [0] * (DECLARATIONS_EVERY - 1)
    assert seen[DECLARATIONS_EVERY] == seen[0]


def test_a_snapshot_that_publishes_sends_two_statements_and_no_transaction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The declarations go in one statement, the snapshot in another: an idle fleet republishes
    them every DECLARATIONS_EVERY snapshots, and four statements in a transaction (six round
    trips with BEGIN and COMMIT) were the largest share of its statements (#37)."""
    sent: list[str] = []
    transactions = 0
    execute, transaction = AsyncCursor.execute, AsyncConnection.transaction

    async def counted_execute(self: AsyncCursor[Any], query: Any, *args: Any, **kw: Any) -> Any:
        sent.append(str(query))
        return await execute(self, query, *args, **kw)

    def counted_transaction(self: AsyncConnection[Any], *args: Any, **kw: Any) -> Any:
        nonlocal transactions
        transactions += 1
        return transaction(self, *args, **kw)

    async def main() -> None:
        pool = await open_pool("default", max_size=1)
        reporter = RuntimeReporter(
            pool,
            instance_id="reporter-count",
            queues={"default": 1},
            declared=declared(get_settings(), registry.jobs()),
            interval_s=10,
            started_at=datetime.now(UTC),
            state=lambda: (0, False, True, False),
        )
        try:
            async with pool.connection():
                pass  # opened before counting
            monkeypatch.setattr(AsyncCursor, "execute", counted_execute)
            monkeypatch.setattr(AsyncConnection, "transaction", counted_transaction)
            await reporter.report_once()
        finally:
            monkeypatch.undo()
            await pool.close()

    asyncio.run(main())
    assert len(sent) == 2, sent
    assert transactions == 0
    # And what it published is all there: the versions behind the hashes too.
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.declared_versions")
        (versions,) = cursor.fetchone()
    assert versions > 0


def delete_descriptors() -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM awa.queue_descriptors")
    finally:
        connection.close()  # this thread's connection


def runtime_row(instance_id: str) -> tuple[datetime, int] | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT last_seen_at, in_flight FROM awa.runtime_instances WHERE instance_id = %s",
                [instance_id],
            )
            row = cursor.fetchone()
            return None if row is None else (row[0], row[1])
    finally:
        connection.close()  # this thread's connection


def test_an_unchanged_snapshot_only_refreshes_last_seen_at(monkeypatch: pytest.MonkeyPatch) -> None:
    """#37: the full upsert was an idle fleet's most expensive statement per call; between
    changes a snapshot sets last_seen_at alone (what liveness is judged by)."""
    from awa_django.worker import reporter as reporter_module

    whole: list[int] = []
    original = reporter_module.write_snapshot

    def counted(*args: object, **kwargs: object) -> object:
        whole.append(1)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(reporter_module, "write_snapshot", counted)
    state = [0]
    peers: list[int] = []

    async def main() -> None:
        pool = await open_pool("default", max_size=1)
        reporter = RuntimeReporter(
            pool,
            instance_id="touch-test",
            queues={"default": 1},
            declared=declared(get_settings(), registry.jobs()),
            interval_s=10,
            started_at=datetime.now(UTC),
            state=lambda: (state[0], False, True, False),
            on_peers=peers.append,
        )
        try:
            await reporter.report_once()  # the first: whole
            first = await asyncio.to_thread(runtime_row, "touch-test")
            await reporter.report_once()  # unchanged: touched
            touched = await asyncio.to_thread(runtime_row, "touch-test")
            assert first is not None and touched is not None
            assert touched[0] > first[0] and len(whole) == 1
            state[0] = 2  # a job started: whole again
            await reporter.report_once()
            assert len(whole) == 2
            assert (await asyncio.to_thread(runtime_row, "touch-test"))[1] == 2  # type: ignore[index]
            # The row went (the leader deleted it as stale): written whole again.
            await asyncio.to_thread(delete_runtime_row, "touch-test")
            await reporter.report_once()
            assert len(whole) == 3 and await asyncio.to_thread(runtime_row, "touch-test")
            # The live processes were counted with the first and second snapshots only (the
            # session tries scale with them): this one alone.
            assert peers == [1, 1]
        finally:
            await pool.close()

    asyncio.run(main())


def delete_runtime_row(instance_id: str) -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "DELETE FROM awa.runtime_instances WHERE instance_id = %s", [instance_id]
            )
    finally:
        connection.close()  # this thread's connection
