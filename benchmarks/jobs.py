"""Handlers the benchmarks run: the drain benchmark's no-ops, one sync (thread pool) and one async
(event loop), the side-by-side probes and the wait-latency target.

Their arguments match the ~256-byte JSON payload built by ``benchmarks.scenarios.job_args``, so
enqueue-time validation binds real arguments, as it would for an application's job.
"""

from __future__ import annotations

import asyncio
import time

import awa_django as awa
from awa_django.declarations.jobs import JobContext
from benchmarks.sidebyside.probe import PROBE

SYNC_KIND = "bench.noop_sync"
ASYNC_KIND = "bench.noop_async"


@awa.job(kind=SYNC_KIND, queue="bench")
def noop_sync(ctx: JobContext, n: int, payload: str) -> None:
    return None


@awa.job(kind=ASYNC_KIND, queue="bench")
async def noop_async(ctx: JobContext, n: int, payload: str) -> None:
    return None


# The side-by-side benchmark's handlers (benchmarks/sidebyside): the same no-op, reporting to
# the probe that every compared system's handlers report to.
PROBE_SYNC_KIND = "bench.probe_sync"
PROBE_ASYNC_KIND = "bench.probe_async"


@awa.job(kind=PROBE_SYNC_KIND, queue="bench")
def probe_sync(ctx: JobContext, n: int, payload: str) -> None:
    PROBE.start(n)
    PROBE.finish(n)


@awa.job(kind=PROBE_ASYNC_KIND, queue="bench")
async def probe_async(ctx: JobContext, n: int, payload: str) -> None:
    PROBE.start(n)
    PROBE.finish(n)


# The wait-latency benchmark's job (benchmarks/wait_latency.py): ends a moment after it starts,
# so that its waiter has registered before the completion it measures.
WAIT_KIND = "bench.wait_target"


@awa.job(kind=WAIT_KIND, queue="bench")
async def wait_target(ctx: JobContext, delay_s: float) -> None:
    await asyncio.sleep(delay_s)


# The fleet benchmark's job when it is told to take time (benchmarks/fleet.py --job-ms): with a
# no-op, a drain measures the claims; with a job that takes a while, it also shows whether every
# process of the fleet keeps its slots busy.
SLEEP_KIND = "bench.sleep_sync"


@awa.job(kind=SLEEP_KIND, queue="bench")
def sleep_sync(ctx: JobContext, n: int, ms: float) -> None:
    time.sleep(ms / 1000)
