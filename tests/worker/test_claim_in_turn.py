"""An empty claim that probably lost its lane to another claimer waits for the lane's claim lock
once instead of leaving the dispatcher idle (issue #37): right after a full claim, on the lane
that claim took jobs from, and after a notification, on whichever lane another session holds.
An idle poll never waits, and a lane held for long gives up after TURN_TIMEOUT_S."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

import awa_django as awa
from awa_django.core.claimed_job import ClaimedJob
from awa_django.core.retry import RetryPolicy
from awa_django.declarations.jobs import DeclaredJob, JobContext
from awa_django.storage.connections import connection_kwargs, open_pool
from awa_django.worker import dispatcher as dispatcher_module
from awa_django.worker.completer import Completer
from awa_django.worker.dispatcher import (
    CONTENDED_PROBE_EVERY,
    Dispatcher,
    DispatcherConfig,
    Permits,
)
from awa_django.worker.handler_threads import HandlerThreads
from awa_django.worker.job_log import JobLog, JobLogConfig
from tests.jobs import record

pytestmark = pytest.mark.usefixtures("awa_db")

POLICY = RetryPolicy(base_s=1, max_s=1, jitter=0, unknown_kind_timeout_s=3600)


async def hold_lane_lock(holding: asyncio.Event, release: asyncio.Event) -> None:
    """Hold the claim lock of the lane of the queue's jobs, as a claimer would, until told."""
    conn = await psycopg.AsyncConnection.connect(**connection_kwargs("default"))
    try:
        async with conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(1096237379, awa.lane_lock_key(queue, priority, "
                "shard)) FROM (SELECT DISTINCT queue, priority, shard FROM awa.ready_entries) l"
            )
            holding.set()
            await release.wait()
    finally:
        await conn.close()


def make_dispatcher(pool: AsyncConnectionPool[Any]) -> Dispatcher:
    """A dispatcher of the default queue at concurrency 4, its jobs no-ops."""

    async def handler(ctx: JobContext, n: int = 0) -> None:
        return None

    job: DeclaredJob[Any, Any] = DeclaredJob(
        handler, kind=record.kind, queue=None, priority=None, max_attempts=None
    )
    completer = Completer(
        pool, batch_size=10, flush_s=0.001, policy=POLICY, now=lambda: datetime.now(UTC)
    )
    return Dispatcher(
        DispatcherConfig(
            queue="default",
            concurrency=4,
            claim_batch_size=4,
            poll_interval_s=30,
            claimed_by="claim-in-turn-test",
            policy=POLICY,
        ),
        pool=pool,
        completer=completer,
        threads=HandlerThreads(1),
        job_log=JobLog(JobLogConfig()),
        resolve=lambda kind: job,
        now=lambda: datetime.now(UTC),
    )


async def claim_while_held(dispatcher: Dispatcher, limit: int, held_s: float) -> list[ClaimedJob]:
    """The dispatcher's claim of ``limit`` while another session holds the lane's claim lock
    for ``held_s``."""
    holding, release = asyncio.Event(), asyncio.Event()
    holder = asyncio.create_task(hold_lane_lock(holding, release))
    await holding.wait()
    asyncio.get_running_loop().call_later(held_s, release.set)
    try:
        return await dispatcher._claim(limit)
    finally:
        release.set()
        await holder


async def claims_while_held(
    *, first: int, then: int, poke: bool, held_s: float
) -> tuple[list[ClaimedJob], list[ClaimedJob], float]:
    """A dispatcher claims ``first`` jobs (none: skipped), then, while another session holds
    the lane's claim lock for ``held_s``, claims ``then``. Returns both claims' jobs and how
    long the second took."""
    pool = await open_pool("default", max_size=2)
    dispatcher = make_dispatcher(pool)
    try:
        before = await dispatcher._claim(first) if first else []
        if poke:
            dispatcher.poke()
        started = time.monotonic()
        after = await claim_while_held(dispatcher, then, held_s)
        took = time.monotonic() - started
    finally:
        await pool.close()
    return before, after, took


def test_an_empty_claim_after_a_full_one_waits_its_turn_at_the_lane() -> None:
    awa.enqueue_many(record, [{"n": n} for n in range(5)])
    before, after, took = asyncio.run(claims_while_held(first=2, then=3, poke=False, held_s=0.3))
    assert len(before) == 2
    # Without the wait, the lane's lock held elsewhere made this claim come back empty.
    assert len(after) == 3 and took >= 0.25


def test_an_empty_claim_after_a_notification_waits_for_the_held_lane() -> None:
    awa.enqueue_many(record, [{"n": n} for n in range(3)])
    _, after, took = asyncio.run(claims_while_held(first=0, then=3, poke=True, held_s=0.3))
    assert len(after) == 3 and took >= 0.25


def test_an_idle_poll_does_not_wait() -> None:
    awa.enqueue_many(record, [{"n": n} for n in range(3)])
    _, after, took = asyncio.run(claims_while_held(first=0, then=3, poke=False, held_s=0.5))
    assert after == [] and took < 0.4


def test_a_short_claim_leaves_nothing_to_wait_for() -> None:
    # Fewer jobs than asked: the queue drained, so the next empty claim does not wait.
    awa.enqueue_many(record, [{"n": n} for n in range(3)])
    before, after, took = asyncio.run(claims_while_held(first=4, then=3, poke=False, held_s=0.5))
    assert len(before) == 3 and after == [] and took < 0.4


def test_a_lane_held_past_the_timeout_is_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatcher_module, "TURN_TIMEOUT_S", 0.2)
    awa.enqueue_many(record, [{"n": n} for n in range(4)])
    before, after, took = asyncio.run(claims_while_held(first=2, then=2, poke=False, held_s=2))
    assert len(before) == 2 and after == [] and 0.15 < took < 1.5


def test_a_claim_that_waited_its_turn_makes_the_next_ones_go_straight_to_theirs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """#37: once a claim had to wait its turn and got all it asked for, the lane's claims queue
    up, and a plain claim would only come back empty (a try of the lock fails while others
    wait): the next claims wait their turn at once, and wait for two free slots first. Every
    CONTENDED_PROBE_EVERY of them, one tries the lane first, which finds it free here: the
    dispatcher claims plainly, for one slot, again."""
    ran: list[str] = []
    for name, label in (("claim_ready", "plain"), ("claim_ready_in_turn", "turn")):
        statement = getattr(dispatcher_module, name)

        def recorded(*args: Any, _statement: Any = statement, _label: str = label, **kw: Any):
            ran.append(_label)
            return _statement(*args, **kw)

        monkeypatch.setattr(dispatcher_module, name, recorded)
    awa.enqueue_many(record, [{"n": n} for n in range(60)])

    async def main() -> list[int]:
        pool = await open_pool("default", max_size=2)
        dispatcher = make_dispatcher(pool)
        assert isinstance(dispatcher.permits, Permits)
        least = []
        try:
            assert len(await dispatcher._claim(2)) == 2
            least.append(dispatcher._contended_least(dispatcher.permits))
            assert len(await claim_while_held(dispatcher, 2, 0.1)) == 2
            for _ in range(CONTENDED_PROBE_EVERY + 2):
                least.append(dispatcher._contended_least(dispatcher.permits))
                assert len(await dispatcher._claim(2)) == 2
        finally:
            await pool.close()
        return least

    least = asyncio.run(main())
    assert ran[:3] == ["plain", "plain", "turn"]
    assert ran[3:] == ["turn"] * CONTENDED_PROBE_EVERY + ["plain", "plain"], ran
    # Concurrency 4: two slots while contended, one before and once the probe found no queue.
    assert least == [1] + [2] * (CONTENDED_PROBE_EVERY + 1) + [1], least
