"""A job module that only the workers of a later deploy import: the test process (the web side,
deployed first) imports it to enqueue, a worker started with ``AWA_JOB_MODULES=tests.jobs``
(the old deploy) has no handler for its kind."""

from __future__ import annotations

import awa_django as awa
from awa_django.declarations.jobs import JobContext
from tests.jobs import record_run


@awa.job(kind="tests.deployed_later", max_attempts=1)
def deployed_later(ctx: JobContext, n: int) -> None:
    record_run(ctx, f"deployed later {n}")
