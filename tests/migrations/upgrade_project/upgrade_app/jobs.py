"""Handlers of the upgrade test. Each records (job id, attempt, handler, which awa_django ran it)
in the run log, so the test can tell every job ran exactly as often as it should, and where."""

from __future__ import annotations

import os
import time
from pathlib import Path

import awa_django as awa

STATE = Path(os.environ["UPGRADE_STATE"])


def record(ctx: awa.JobContext, event: str) -> None:
    line = f"{ctx.job_id} {ctx.attempt} {ctx.kind} {event} {Path(awa.__file__).parent}\n"
    with (STATE / "runs.log").open("a") as log:
        log.write(line)


@awa.job(queue="default")
def quick(ctx: awa.JobContext, n: int) -> None:
    record(ctx, "ran")


@awa.job(queue="default", max_attempts=1)
def broken(ctx: awa.JobContext) -> None:
    record(ctx, "ran")
    raise RuntimeError("broken on purpose")


@awa.job(queue="dead", max_attempts=1)
def doomed(ctx: awa.JobContext) -> None:
    record(ctx, "ran")
    raise RuntimeError("dead-lettered on purpose")


@awa.job(queue="default", max_attempts=3)
def flaky(ctx: awa.JobContext) -> None:
    record(ctx, "ran")
    if ctx.attempt == 1:
        raise awa.RetryAfter(3)


@awa.job(queue="default")
def payment(ctx: awa.JobContext) -> awa.WaitForCallback:
    record(ctx, "ran")
    token = ctx.register_callback(timeout=600)
    (STATE / "callback.token").write_text(token)
    return awa.WaitForCallback(token)


@awa.job(queue="live")
def blocker(ctx: awa.JobContext) -> None:
    """Runs until the test creates the release file: the job a worker holds during the upgrade."""
    record(ctx, "started")
    while not (STATE / "release").exists():
        time.sleep(0.05)
    record(ctx, "ran")


@awa.job(queue="default", unique=awa.Unique(states=awa.Unique.ACTIVE_STATES))
def refresh(ctx: awa.JobContext, user_id: int) -> None:
    record(ctx, "ran")


@awa.periodic("0 3 * * *")
@awa.job(queue="default")
def nightly(ctx: awa.JobContext) -> None:
    record(ctx, "ran")
