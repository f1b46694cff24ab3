"""Handlers of the chaos soak (benchmarks/soak.py). Each records its runs in ``soak_runs``
(created by the soak), so the reconciliation does not depend on the ring's short retention."""

from __future__ import annotations

import time
from typing import Any

from django.db import connection

import awa_django as awa
from awa_django.declarations.jobs import JobContext


def record(ctx: JobContext, kind: str, outcome: str, t: float) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO soak_runs (job_id, run_lease, kind, outcome, enqueued, started)"
            " VALUES (%s, %s, %s, %s, to_timestamp(%s), to_timestamp(%s))",
            [ctx.job_id, ctx.run_lease, kind, outcome, t, time.time()],
        )


@awa.job(kind="soak.ok")
def ok(ctx: JobContext, t: float) -> None:
    record(ctx, "soak.ok", "ok", t)


@awa.job(kind="soak.retry", max_attempts=3)
def retry(ctx: JobContext, t: float) -> None:
    if ctx.attempt == 1:
        record(ctx, "soak.retry", "error", t)
        raise RuntimeError("soak: the first attempt fails")
    record(ctx, "soak.retry", "ok", t)


@awa.job(kind="soak.dead", max_attempts=2)
def dead(ctx: JobContext, t: float) -> None:
    record(ctx, "soak.dead", "error", t)
    raise RuntimeError("soak: every attempt fails")


@awa.job(kind="soak.scheduled")
def scheduled(ctx: JobContext, t: float) -> None:
    record(ctx, "soak.scheduled", "ok", t)


@awa.job(kind="soak.callback")
def callback(ctx: JobContext, t: float) -> Any:
    token = ctx.register_callback(timeout=300)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO soak_tokens (token, job_id) VALUES (%s, %s)", [token, ctx.job_id]
        )
    record(ctx, "soak.callback", "waiting", t)
    return awa.WaitForCallback(token)


@awa.job(kind="soak.cron")
def cron(ctx: JobContext) -> None:
    record(ctx, "soak.cron", "ok", time.time())
