"""Handlers that misbehave, for the tests of what a worker survives (issue #24): text that
PostgreSQL cannot store, values the database refuses. Worker subprocesses import this module
through ``AWA_JOB_MODULES`` (see ``MODULES``); in-process tests import it to register them."""

from __future__ import annotations

import awa_django as awa
from awa_django.jobs import JobContext
from tests.jobs import record_run

# AWA_JOB_MODULES for a worker subprocess that runs these as well as tests.jobs.
MODULES = "tests.jobs,tests.misbehaving"

# A lone surrogate: not UTF-8, refused by json and jsonb. os.fsdecode and the surrogateescape
# error handler produce them from undecodable bytes.
SURROGATE = "\udcff"


@awa.job(kind="tests.surrogate_failure", max_attempts=2)
def surrogate_failure(ctx: JobContext) -> None:
    """Reports progress and fails, both with a lone surrogate."""
    record_run(ctx, "surrogate_failure")
    ctx.set_progress(50, f"file {SURROGATE}.txt")
    raise RuntimeError(f"bad {SURROGATE} text")


@awa.job(kind="tests.surrogate_cancel")
def surrogate_cancel(ctx: JobContext) -> None:
    raise awa.Cancel(f"gone {SURROGATE} away")
