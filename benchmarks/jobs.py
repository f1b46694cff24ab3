"""No-op handlers the drain benchmark runs: one sync (thread pool) and one async (event loop).

Their arguments match the ~256-byte JSON payload built by ``benchmarks.scenarios.job_args``, so
enqueue-time validation binds real arguments, as it would for an application's job.
"""

from __future__ import annotations

import awa_django as awa
from awa_django.jobs import JobContext

SYNC_KIND = "bench.noop_sync"
ASYNC_KIND = "bench.noop_async"


@awa.job(kind=SYNC_KIND, queue="bench")
def noop_sync(ctx: JobContext, n: int, payload: str) -> None:
    return None


@awa.job(kind=ASYNC_KIND, queue="bench")
async def noop_async(ctx: JobContext, n: int, payload: str) -> None:
    return None
