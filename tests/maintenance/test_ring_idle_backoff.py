"""The leader's ring passes back off while both rings are idle (issue #37): each pass that
finds nothing enqueued or claimed since the last rotation doubles the wait before the next one,
up to IDLE_BACKOFF_MAX intervals, and the first pass that finds work goes back to the
configured interval."""

from __future__ import annotations

import asyncio

import pytest

import awa_django as awa
from awa_django.maintenance.rings import IDLE_BACKOFF_MAX, RingConfig, RingMaintainer
from awa_django.storage.connections import open_pool

pytestmark = pytest.mark.usefixtures("awa_db")


def test_ring_passes_back_off_while_idle_and_not_once_work_comes() -> None:
    async def passes(count: int, maintainer: RingMaintainer) -> list[float]:
        intervals = []
        for _ in range(count):
            await maintainer.run_once()
            intervals.append(maintainer.interval_s)
        return intervals

    async def main() -> tuple[list[float], list[float], list[float]]:
        pool = await open_pool("default", max_size=1)
        try:
            maintainer = RingMaintainer(
                pool,
                RingConfig(
                    interval_s=1.0,
                    completed_retention_s=0,
                    failed_retention_s=3600,
                    lock_timeout_ms=200,
                ),
            )
            idle = await passes(5, maintainer)
            await asyncio.to_thread(enqueue_one)
            busy = await passes(1, maintainer)
            # That job's slot rotated; with nothing new both rings are idle again.
            again = await passes(3, maintainer)
        finally:
            await pool.close()
        return idle, busy, again

    idle, busy, again = asyncio.run(main())
    assert idle == [2.0, 4.0, 8.0, 8.0, 8.0] and IDLE_BACKOFF_MAX == 8
    assert busy == [1.0]
    assert again[-1] > 1.0


def enqueue_one() -> None:
    from django.db import connection

    try:
        awa.enqueue("tests.noop", args={})
    finally:
        connection.close()  # this thread's connection
