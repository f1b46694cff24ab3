"""What an idle worker sends the server (issue #37), piece by piece against a real server: a
process that is not its queue's waiting candidate does not claim at every poll interval (it
only tries the candidate lock, to find a candidate that died), the runtime snapshot
publishes the process's declarations at start and then only when a snapshot of every
DECLARATIONS_EVERY intervals finds the stored ones differ, its statements are prepared at their
first run, and a process whose snapshot does not change refreshes it less often."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection
from psycopg import AsyncConnection, AsyncCursor

import awa_django as awa
from awa_django.conf import get_settings
from awa_django.declarations.jobs import registry
from awa_django.ops.descriptors import declared
from awa_django.storage import connections
from awa_django.storage.connections import open_pool
from awa_django.storage.runtime import list_runtimes
from awa_django.storage.session import SharedSession
from awa_django.storage.statement import run
from awa_django.worker.reporter import DECLARATIONS_EVERY, RuntimeReporter, idle_intervals
from awa_django.worker.wake import IDLE_POLL_BACKOFF_MAX, IdleWait, WakeLocks, WakeState

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


def test_a_waiting_candidates_poll_backs_off_until_a_wake_up() -> None:
    """#37: the candidate that waits for its queue polls it only in case a notification got
    lost; each empty poll doubles the next one's wait, up to IDLE_POLL_BACKOFF_MAX intervals
    (where ten queues' candidates claimed ten times a second in an idle fleet). Work whose
    notification is lost is still found within that bound, and a wake-up, or the session's
    loss, sets the poll back to one interval."""
    poll_s = 0.05
    bound_s = poll_s * IDLE_POLL_BACKOFF_MAX

    async def main() -> None:
        session = await listening_session()
        locks = WakeLocks(session)
        wait = IdleWait("default", locks, poll_interval_s=poll_s)
        wakeup, stopping = asyncio.Event(), asyncio.Event()
        clock = asyncio.get_running_loop().time

        async def timed_sleep() -> float:
            # One empty claim's sleep, as the dispatcher's loop takes it.
            started = clock()
            await wait.sleep(wakeup, stopping)
            wakeup.clear()
            return clock() - started

        try:
            assert await timed_sleep() < bound_s  # armed: claims once more before sleeping
            assert locks.holds("default")
            sleeps = [await timed_sleep() for _ in range(6)]
            # Each empty poll waited twice the one before (a loaded machine only adds to
            # them), up to the bound, which no sleep passed: a job whose notification is lost
            # waits that long at most.
            expected = [poll_s * 2**n for n in range(5)] + [bound_s]
            assert all(s >= e * 0.9 for s, e in zip(sleeps, expected, strict=True)), sleeps
            assert max(sleeps) < bound_s + 0.3, sleeps

            # A notification ends the sleep at once, and the next empty poll waits one
            # interval again.
            sleeping = asyncio.create_task(timed_sleep())
            await asyncio.sleep(0.1)
            wakeup.set()
            assert await asyncio.wait_for(sleeping, 1) < 0.3
            assert await timed_sleep() < bound_s / 2

            # Backed off again, the session's connection is lost: no notification could
            # arrive, so the sleep ends, and the dispatcher polls until the session is back.
            for _ in range(5):
                await timed_sleep()
            sleeping = asyncio.create_task(timed_sleep())
            await asyncio.sleep(0.05)
            await session.close()
            assert await asyncio.wait_for(sleeping, 1) < bound_s / 2
            assert not locks.holds("default")
        finally:
            await locks.close()
            await session.close()

    asyncio.run(main())


def test_a_poll_only_dispatcher_keeps_its_poll_interval() -> None:
    # No session, so no notification: its poll is how it finds work, and does not back off.
    async def main() -> list[float]:
        wait = IdleWait("default", None, poll_interval_s=0.1)
        wakeup, stopping = asyncio.Event(), asyncio.Event()
        clock = asyncio.get_running_loop().time
        sleeps = []
        for _ in range(6):
            started = clock()
            await wait.sleep(wakeup, stopping)
            sleeps.append(clock() - started)
        return sleeps

    sleeps = asyncio.run(main())
    # Six intervals (0.6 s, a loaded machine adds to it); backing off would take 4.7 s.
    assert sum(sleeps) < 2.0, sleeps


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
            stale_after_s=60,
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


class Counted:
    """The statements sent and the transactions opened on psycopg's async connections from
    ``start`` until the monkeypatch is undone."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.transactions = 0

    def start(self, monkeypatch: pytest.MonkeyPatch) -> None:
        execute, transaction = AsyncCursor.execute, AsyncConnection.transaction

        async def counted_execute(cursor: AsyncCursor[Any], query: Any, *a: Any, **kw: Any) -> Any:
            self.sent.append(str(query))
            return await execute(cursor, query, *a, **kw)

        def counted_transaction(conn: AsyncConnection[Any], *a: Any, **kw: Any) -> Any:
            self.transactions += 1
            return transaction(conn, *a, **kw)

        monkeypatch.setattr(AsyncCursor, "execute", counted_execute)
        monkeypatch.setattr(AsyncConnection, "transaction", counted_transaction)


def idle_reporter(pool: Any, instance_id: str, **options: Any) -> RuntimeReporter:
    """A reporter of one process with nothing in flight, serving ``default``."""
    return RuntimeReporter(
        pool,
        instance_id=instance_id,
        queues=options.pop("queues", {"default": 1}),
        declared=declared(get_settings(), registry.jobs()),
        interval_s=options.pop("interval_s", 10),
        stale_after_s=options.pop("stale_after_s", 60),
        started_at=datetime.now(UTC),
        state=lambda: (0, False, True, False),
        **options,
    )


def test_a_snapshot_that_publishes_sends_one_statement_and_no_transaction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The declarations go in the statement that writes the snapshot: an idle fleet republishes
    them every DECLARATIONS_EVERY intervals, and four statements in a transaction (six round
    trips with BEGIN and COMMIT), then two statements, were the largest share of its
    statements (#37)."""
    counted = Counted()

    async def main() -> None:
        pool = await open_pool("default", max_size=1)
        reporter = idle_reporter(pool, "reporter-count")
        try:
            async with pool.connection():
                pass  # opened before counting
            counted.start(monkeypatch)
            await reporter.report_once()
        finally:
            monkeypatch.undo()
            await pool.close()

    asyncio.run(main())
    assert len(counted.sent) == 1, counted.sent
    assert counted.transactions == 0
    # And what it published is all there: the versions behind the hashes too.
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.declared_versions")
        (versions,) = cursor.fetchone()
    assert versions > 0


def execute_here(sql: str) -> None:
    """Run ``sql`` on this thread's Django connection, closed after."""
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql)
    finally:
        connection.close()  # this thread's connection


def delete_descriptors() -> None:
    execute_here("DELETE FROM awa.queue_descriptors")


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
            stale_after_s=20,  # an unchanged row refreshed every interval (idle_intervals)
            started_at=datetime.now(UTC),
            state=lambda: (state[0], False, True, False),
            on_peers=peers.append,
        )
        try:
            await reporter.report_once()  # the first: whole
            # The second too, whatever changed: by then a fleet that started together has
            # written its rows, and the process counts its peers.
            await reporter.report_once()
            first = await asyncio.to_thread(runtime_row, "touch-test")
            await reporter.report_once()  # unchanged: touched
            touched = await asyncio.to_thread(runtime_row, "touch-test")
            assert first is not None and touched is not None
            assert touched[0] > first[0] and len(whole) == 2
            state[0] = 2  # a job started: whole again
            await reporter.report_once()
            assert len(whole) == 3
            assert (await asyncio.to_thread(runtime_row, "touch-test"))[1] == 2  # type: ignore[index]
            # The row went (the leader deleted it as stale): written whole again.
            await asyncio.to_thread(delete_runtime_row, "touch-test")
            await reporter.report_once()
            assert len(whole) == 4 and await asyncio.to_thread(runtime_row, "touch-test")
            # Each whole snapshot counted the live processes (the session tries scale with
            # them), in the statement that wrote it; the touch did not: this one alone.
            assert peers == [1, 1, 1, 1]
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


def test_idle_intervals_fit_three_refreshes_in_the_staleness_window() -> None:
    assert idle_intervals(10, 60) == 2  # the defaults: an idle process refreshes every 20 s
    assert idle_intervals(10, 20) == 1  # never less often than every interval
    assert idle_intervals(0.25, 3) == 4


def live_rows(stale_after_s: float) -> list[tuple[str, datetime, bool]]:
    try:
        with connection.cursor() as cursor:
            rows = run(cursor, list_runtimes(stale_after_s=stale_after_s))
            return [(r["instance_id"], r["last_seen_at"], r["live"]) for r in rows]
    finally:
        connection.close()  # this thread's connection


def test_an_idle_process_refreshes_its_row_a_few_times_per_staleness_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """#37: each snapshot of an idle process was a statement and a transaction every interval;
    one whose snapshot does not change waits a third of RUNTIME_STALE_AFTER_S instead, and its
    row stays live throughout."""
    interval_s, stale_after_s, window_s = 0.25, 3.0, 4.0
    counted = Counted()

    async def main() -> list[list[tuple[str, datetime, bool]]]:
        pool = await open_pool("default", max_size=1)
        reporter = idle_reporter(
            pool, "idle-test", interval_s=interval_s, stale_after_s=stale_after_s
        )
        samples = []
        try:
            await reporter.start()
            await asyncio.sleep(1.0)  # past the first snapshots
            counted.start(monkeypatch)
            deadline = asyncio.get_running_loop().time() + window_s
            while asyncio.get_running_loop().time() < deadline:
                samples.append(await asyncio.to_thread(live_rows, stale_after_s))
                await asyncio.sleep(0.2)
            monkeypatch.undo()
        finally:
            monkeypatch.undo()
            await reporter.stop()
            await pool.close()
        return samples

    samples = asyncio.run(main())
    # Per DECLARATIONS_EVERY (6) intervals: one refresh (4 intervals after the last write, a
    # third of the window) and the whole snapshot that compares the declarations, 2
    # statements, each its own transaction, where a refresh every interval made them 8 (5
    # refreshes, the republication, the snapshot and the peer count): about 5 in the 16
    # intervals of the window against 21.
    assert len(counted.sent) <= 8, counted.sent
    assert counted.transactions == 0
    assert any("last_seen_at = now()" in q for q in counted.sent)
    # Live at every look, and refreshed during the window.
    assert all(rows and all(live for _, _, live in rows) for rows in samples), samples
    assert len({seen for rows in samples for _, seen, _ in rows}) >= 2


def test_a_whole_snapshot_reads_the_peers_and_the_live_concurrency_in_its_statement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """#37: the peer count and the live-concurrency read were two more statements (and
    transactions) of every idle process; they are read back by the snapshot's own statement."""
    awa.queues.set_concurrency("default", 4, by="alice")
    counted = Counted()
    peers: list[int] = []
    concurrency: list[dict[str, int]] = []

    async def main() -> None:
        pool = await open_pool("default", max_size=1)
        reporter = idle_reporter(
            pool,
            "report-test",
            queues={"default": 1, "other": 1},
            on_peers=peers.append,
            on_concurrency=concurrency.append,
        )
        try:
            await reporter.report_once()  # declarations and the snapshot
            counted.start(monkeypatch)
            await reporter.report_once()  # the second: whole, the peers counted
        finally:
            monkeypatch.undo()
            await pool.close()

    asyncio.run(main())
    assert len(counted.sent) == 1, counted.sent
    assert peers == [1, 1]
    assert concurrency == [{"default": 4}, {"default": 4}]


def test_a_poll_only_refresh_reads_the_live_concurrency_in_its_statement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """#37: a poll-only process, which no notification tells of a change, read the live
    concurrency in a statement of its own every interval; the refresh of its unchanged
    snapshot reads it back instead, and one that finds no row writes the snapshot whole."""
    awa.queues.set_concurrency("default", 4, by="alice")
    counted = Counted()
    concurrency: list[dict[str, int]] = []

    async def main() -> None:
        pool = await open_pool("default", max_size=1)
        reporter = idle_reporter(
            pool,
            "refresh-test",
            stale_after_s=20,  # an unchanged row refreshed every interval (idle_intervals)
            on_concurrency=concurrency.append,
            refresh_reads_concurrency=True,
        )
        try:
            await reporter.report_once()  # the first two: whole
            await reporter.report_once()
            counted.start(monkeypatch)
            await reporter.report_once()  # unchanged: the refresh
            monkeypatch.undo()
            await asyncio.to_thread(delete_runtime_row, "refresh-test")
            await reporter.report_once()  # no row to refresh: written whole
            assert await asyncio.to_thread(runtime_row, "refresh-test")
        finally:
            monkeypatch.undo()
            await pool.close()

    asyncio.run(main())
    assert len(counted.sent) == 1 and "last_seen_at = now()" in counted.sent[0], counted.sent
    assert concurrency == [{"default": 4}] * 4


async def prepared_on(conn: AsyncConnection[Any]) -> list[str]:
    """The statements prepared on ``conn``'s server session."""
    cursor = await conn.execute("SELECT statement FROM pg_prepared_statements")
    return [str(row[0]) for row in await cursor.fetchall()]


def test_the_snapshot_statements_are_prepared_at_their_first_run_where_the_pool_prepares() -> None:
    """#37: an idle process runs its snapshot statements a few times a minute over its pool's
    connections; psycopg prepares a statement at its fifth run on a connection, so the server
    planned them on every run for the process's first minutes. A pool that prepares nothing
    (poll-only workers, behind a transaction pooler) still prepares nothing."""

    async def main(prepare: bool) -> list[str]:
        pool = await open_pool("default", max_size=1, prepare=prepare)
        reporter = idle_reporter(pool, f"prepared-{prepare}", stale_after_s=20)
        try:
            await reporter.report_once()  # whole, with the declarations
            await reporter.report_once()  # whole
            await reporter.report_once()  # unchanged: touched
            async with pool.connection() as conn:
                return await prepared_on(conn)
        finally:
            await pool.close()

    prepared = asyncio.run(main(True))
    assert any("INSERT INTO awa.runtime_instances" in s for s in prepared), prepared
    assert any("SET last_seen_at = now()" in s for s in prepared), prepared
    assert len(prepared) == 3, prepared  # the first snapshot's, the later ones', the touch
    assert asyncio.run(main(False)) == []


def write_foreign_descriptor() -> None:
    execute_here("UPDATE awa.queue_descriptors SET descriptor_hash = 'other-version'")


def stored_hashes() -> set[str]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT descriptor_hash FROM awa.queue_descriptors")
            return {row[0] for row in cursor.fetchall()}
    finally:
        connection.close()  # this thread's connection


def test_later_snapshots_publish_the_declarations_only_when_the_stored_ones_differ(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """#37: the declarations' four upserts went with every DECLARATIONS_EVERY-th snapshot, and
    the server planned them each time; they go with the first only, and again, in a statement
    of their own, when such a snapshot finds another version's descriptor stored (a rolling
    deploy): the stored one is this process's again within DECLARATIONS_EVERY intervals."""
    counted = Counted()

    async def main() -> tuple[list[str], set[str], set[str], list[str]]:
        pool = await open_pool("default", max_size=1)
        # Refreshed every interval, so that each call between the republications sends one.
        reporter = idle_reporter(pool, "publish-test", stale_after_s=20)
        try:
            await reporter.report_once()  # the first: publishes
            mine = await asyncio.to_thread(stored_hashes)
            counted.start(monkeypatch)
            for _ in range(DECLARATIONS_EVERY):
                await reporter.report_once()
            agreeing = list(counted.sent)
            monkeypatch.undo()
            await asyncio.to_thread(write_foreign_descriptor)
            counted.sent.clear()
            counted.start(monkeypatch)
            for _ in range(DECLARATIONS_EVERY - 1):
                await reporter.report_once()
            foreign = await asyncio.to_thread(stored_hashes)
            await reporter.report_once()  # due: compares, finds the other version's
            monkeypatch.undo()
            restored = await asyncio.to_thread(stored_hashes)
            assert restored == mine, (restored, mine)
            return agreeing, mine, foreign, list(counted.sent)
        finally:
            monkeypatch.undo()
            await pool.close()

    agreeing, mine, foreign, diverged = asyncio.run(main())
    # One statement a call, none with the declarations' upserts, while the stored ones agree.
    assert len(agreeing) == DECLARATIONS_EVERY, agreeing
    assert not any("awa.queue_descriptors AS q" in s for s in agreeing), agreeing
    assert foreign == {"other-version"} != mine
    # The calls before the due one left the other version's; the due one published after its
    # snapshot, in one more statement.
    assert len(diverged) == DECLARATIONS_EVERY + 1, diverged
    assert "awa.queue_descriptors AS q" in diverged[-1]
