"""No-op handlers the drain benchmark runs: one sync (thread pool) and one async (event loop).

Their arguments match the ~256-byte JSON payload built by ``benchmarks.scenarios.job_args``, so
enqueue-time validation binds real arguments, as it would for an application's job.
"""

from __future__ import annotations

import awa_django as awa
from awa_django.jobs import JobContext
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
