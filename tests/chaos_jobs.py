"""Handlers of the chaos test (tests/processes/test_chaos.py), imported by its worker
subprocesses through ``AWA_JOB_MODULES``."""

from __future__ import annotations

import time

import awa_django as awa
from awa_django.declarations.jobs import JobContext
from tests.jobs import record_run


@awa.job(kind="tests.chaos_step")
def chaos_step(ctx: JobContext, n: int) -> None:
    time.sleep(0.02)
    record_run(ctx, str(n))


@awa.job(kind="tests.chaos_poison", max_attempts=2)
def chaos_poison(ctx: JobContext) -> None:
    """Fails every attempt with an error whose text PostgreSQL cannot store as it is (a lone
    surrogate, as ``os.fsdecode`` produces for undecodable file names)."""
    record_run(ctx, "poison")
    raise RuntimeError("poison pill \ud800 from a file name")


@awa.job(kind="tests.chaos_slow")
def chaos_slow(ctx: JobContext, n: int, seconds: float = 1.0) -> None:
    """Long enough to heartbeat (the chaos tests beat every 0.2 s) before it records its run."""
    time.sleep(seconds)
    record_run(ctx, str(n))
