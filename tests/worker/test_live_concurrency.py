"""Live concurrency inside a worker (#36): permits resized in place, a weighted queue's cap, and a
poll-only worker (no session, so no notification) that applies the value at start and on its
periodic read, and reports it in its runtime snapshot."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

import awa_django as awa
from awa_django.sql import queries
from awa_django.worker.dispatcher import Dispatcher, Permits
from awa_django.worker.weighted import QueueShare, WeightedPermits
from tests.conftest import BackgroundWorker, wait_until
from tests.worker.test_idle_statements import Counted


def test_permits_lowered_below_use_hand_none_out_until_enough_finish():
    async def main() -> None:
        permits = Permits(4)
        assert permits.try_reserve(4) == 4
        permits.resize(1)
        assert (permits.total, permits.free) == (1, -3)
        for _ in range(3):
            permits.release()
            assert permits.try_reserve(1) == 0  # still at or over the new limit
        permits.release()
        assert permits.try_reserve(5) == 1
        permits.resize(6)
        assert permits.try_reserve(10) == 5
        permits.resize(None)  # the configured 4, with 6 in use
        assert permits.free == -2
        # A reserve that waits is woken by a raise, not only by a release.
        stopping = asyncio.Event()
        waiting = asyncio.create_task(permits.reserve(3, stopping))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        permits.resize(9)
        assert await asyncio.wait_for(waiting, 1) == 3

    asyncio.run(main())


def test_a_reserve_waiting_for_a_slot_is_woken_by_each_release():
    # A release signals only while a reserve waits (every finished job releases its slot): a
    # reserve that waits again after taking what it waited for must still be woken.
    async def main() -> None:
        stopping = asyncio.Event()
        permits = Permits(1)
        assert permits.try_reserve(1) == 1
        permits.release()
        assert permits.try_reserve(1) == 1  # taken back before anyone waited
        for _ in range(3):
            waiting = asyncio.create_task(permits.reserve(1, stopping))
            await asyncio.sleep(0.01)
            assert not waiting.done()
            permits.release()
            assert await asyncio.wait_for(waiting, 1) == 1
        waiting = asyncio.create_task(permits.reserve(1, stopping))
        await asyncio.sleep(0.01)
        stopping.set()
        assert await asyncio.wait_for(waiting, 1) == 0

    asyncio.run(main())


class CountedEvent(asyncio.Event):
    def __init__(self) -> None:
        super().__init__()
        self.sets = 0

    def set(self) -> None:
        self.sets += 1
        super().set()


def test_the_releases_before_a_waiting_reserve_wakes_signal_it_once() -> None:
    # The jobs of a batch that finish in one turn of the loop each release their slot: the
    # first wakes the waiting reserve, the others find it woken and signal nothing (a call
    # each); a reserve that waits again is signalled again.
    async def main() -> None:
        stopping = asyncio.Event()
        permits = Permits(3)
        released = permits._released = CountedEvent()
        assert permits.try_reserve(3) == 3
        for round in (1, 2):
            waiting = asyncio.create_task(permits.reserve(3, stopping))
            await asyncio.sleep(0.01)
            permits.release()
            permits.release()
            permits.release()
            assert released.sets == round
            assert await asyncio.wait_for(waiting, 1) == 3

    asyncio.run(main())


def test_permits_wait_a_while_for_the_least_slots_asked_for():
    # A dispatcher whose claims queue at the lane claims once two slots are free, or once one
    # is and the others stayed busy for its patience (#37).
    async def main() -> None:
        loop = asyncio.get_running_loop()
        stopping = asyncio.Event()
        permits = Permits(3)
        assert permits.try_reserve(3) == 3
        waiting = asyncio.create_task(permits.reserve(3, stopping, least=2, patience_s=5))
        permits.release()
        await asyncio.sleep(0.02)
        assert not waiting.done()  # one free: waits for a second one
        permits.release()
        assert await asyncio.wait_for(waiting, 1) == 2
        permits.release()
        started = loop.time()
        assert await permits.reserve(3, stopping, least=2, patience_s=0.05) == 1
        assert loop.time() - started >= 0.04
        # Fewer slots than asked for: all of them do.
        assert await asyncio.wait_for(Permits(1).reserve(3, stopping, least=2), 1) == 1

    asyncio.run(main())


def test_a_weighted_queue_is_held_to_its_cap():
    async def main() -> None:
        pool = WeightedPermits(10, {"a": QueueShare(0, 1), "b": QueueShare(0, 1)})
        a = pool.for_queue("a")
        a.resize(3)
        assert await a.reserve(10, asyncio.Event()) == 3
        assert a.try_reserve(10) == 0
        a.resize(None)  # alone with work: may use the whole limit again
        assert a.try_reserve(10) == 7

    asyncio.run(main())


@contextmanager
def default_dispatcher(**settings: Any) -> Iterator[Dispatcher]:
    """The dispatcher of ``default`` (concurrency 2) in a worker running with ``settings``."""
    conf = {"QUEUES": {"default": {"concurrency": 2}}, "RUNTIME_SNAPSHOT_INTERVAL_S": 0.2}
    with override_settings(AWA={**conf, **settings}):
        worker = BackgroundWorker(maintenance=False).start()
        try:
            yield worker.runtime._dispatchers.by_queue["default"]
        finally:
            worker.stop()


@pytest.mark.usefixtures("awa_db")
def test_a_poll_only_worker_applies_the_value_at_start_and_when_it_reads_again():
    awa.queues.set_concurrency("default", 5, by="alice")
    with default_dispatcher(WORKER_SESSION=False) as dispatcher:
        # Read before the first claim: a restart keeps what the operator set.
        assert dispatcher.permits.total == 5
        wait_until(lambda: [r.queues for r in awa.runtimes.list()] == [{"default": 5}])
        awa.queues.set_concurrency("default", 7)
        wait_until(lambda: dispatcher.permits.total == 7, timeout=5)
        wait_until(lambda: [r.queues for r in awa.runtimes.list()] == [{"default": 7}])
        awa.queues.reset_concurrency("default")
        wait_until(lambda: dispatcher.permits.total == 2, timeout=5)


@pytest.mark.usefixtures("awa_db")
def test_an_idle_poll_only_worker_reads_the_live_concurrency_only_with_its_snapshot(
    monkeypatch: pytest.MonkeyPatch,
):
    """#37: a poll-only worker read its queues' live concurrency in a statement of its own
    every RUNTIME_SNAPSHOT_INTERVAL_S, besides its snapshot's statements. Idle, it now sends
    only the snapshot's, which read the value back: per DECLARATIONS_EVERY (6) intervals, two
    refreshes (every idle_intervals, here 2) and the whole snapshot, where it sent those three
    and six reads. A change is still applied, at the next of them."""
    intervals, interval_s = 15, 0.2
    counted = Counted()
    with default_dispatcher(WORKER_SESSION=False, RUNTIME_STALE_AFTER_S=1.5) as dispatcher:
        time.sleep(2 * interval_s)  # past the first two snapshots, both written whole
        counted.start(monkeypatch)
        time.sleep(intervals * interval_s)
        monkeypatch.undo()
        awa.queues.set_concurrency("default", 7)
        wait_until(lambda: dispatcher.permits.total == 7, timeout=5)
    own_reads = [q for q in counted.sent if q == queries("control")["queue_concurrency"]]
    snapshots = [q for q in counted.sent if "awa.runtime_instances" in q]
    assert own_reads == []
    # 15 intervals: 8 snapshot statements at most (a loaded machine only stretches them), and
    # every one reads the live concurrency; they were 8 and 15 reads.
    assert 1 <= len(snapshots) <= 8, snapshots
    assert all("m.concurrency IS NOT NULL" in q for q in snapshots), snapshots


def set_concurrency_unannounced(queue: str, concurrency: int) -> None:
    """As if the awa_control notification were lost (sent while the session was down)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.queue_meta (queue, concurrency) VALUES (%s, %s)"
            " ON CONFLICT (queue) DO UPDATE SET concurrency = excluded.concurrency",
            [queue, concurrency],
        )


@pytest.mark.usefixtures("awa_db")
def test_a_worker_with_a_session_applies_a_value_it_was_not_told_about_from_its_snapshots():
    """The notification is the way a change arrives; the snapshots a worker writes whole (at
    least every DECLARATIONS_EVERY intervals) read the values back as the safety net, in the
    snapshot's own statement (#37), even while the worker idles."""
    with default_dispatcher(RUNTIME_STALE_AFTER_S=1.5) as dispatcher:
        assert dispatcher.permits.total == 2
        set_concurrency_unannounced("default", 6)
        wait_until(lambda: dispatcher.permits.total == 6, timeout=5)
        wait_until(lambda: [r.queues for r in awa.runtimes.list()] == [{"default": 6}])
