"""Callbacks at the storage level: how rescue treats a waiting and a resumed attempt, and what
callbacks write (the lease ring only; the queue ring is still append-only)."""

from __future__ import annotations

import asyncio

import pytest
from django.db import connection

import awa_django as awa
from awa_django.callbacks.tokens import format_token, new_callback
from awa_django.core.claimed_job import claimed_job_rows
from awa_django.storage.callbacks import register_callback
from awa_django.storage.connections import connect
from awa_django.storage.execution import find_rescuable
from awa_django.storage.queue import ClaimRequest, claim_ready
from awa_django.storage.statement import run_async
from tests.callbacks.helpers import rescue, scalar
from tests.conftest import wait_until
from tests.jobs import noop
from tests.storage.test_hot_path_invariant import delta, table_stats

pytestmark = [pytest.mark.usefixtures("awa_db"), pytest.mark.django_db(transaction=True)]

QUEUE_RING = ("ready_entries_", "claim_receipts_", "done_entries_", "ready_tombstones_")


def claim_and_register(*, deadline_s: float, timeout_s: float = 3600.0) -> str:
    async def main() -> str:
        async with await connect("default") as conn:
            (job,) = await run_async(
                conn,
                claim_ready(
                    ClaimRequest(
                        queue="default", claimed_by="test", deadline_s=deadline_s, aging_s=0.0
                    ),
                    rows=claimed_job_rows,
                    limit=1,
                ),
            )
            ref = new_callback(job.job_id, job.run_lease)
            assert await run_async(
                conn, register_callback(ref, timeout_s=timeout_s, claimed_by="test")
            )
            return format_token(ref)

    return asyncio.run(main())


def rescuable_reasons(staleness_s: float = 3600.0) -> list[str]:
    async def main() -> list[str]:
        async with await connect("default") as conn:
            _, finds = find_rescuable(rows=claimed_job_rows, staleness_s=staleness_s, limit=9)
            return [r.reason for r in await run_async(conn, finds)]

    return asyncio.run(main())


def test_waiting_attempt_ignores_silence_and_a_resumed_one_gets_a_fresh_deadline():
    noop.enqueue()
    token = claim_and_register(deadline_s=0.5)
    scalar("SELECT pg_sleep(0.7)")
    # Past its claim deadline and silent, but waiting on a callback: nothing to rescue.
    assert rescuable_reasons(staleness_s=0.001) == []
    awa.resume_external(token, {"go": True})
    # Resumed: running again, on a fresh 0.5 s deadline counted from the resume, which its
    # worker enforces: the leader never rescues for a deadline...
    assert scalar("SELECT deadline_at > now() FROM awa.leases") is True
    scalar("SELECT pg_sleep(0.7)")
    assert scalar("SELECT deadline_at < now() FROM awa.leases") is True
    assert rescuable_reasons() == []
    # ...but silence counts again.
    assert rescuable_reasons(staleness_s=0.001) == ["heartbeat"]


def test_expired_callback_is_rescued_with_its_reason():
    noop.enqueue()
    claim_and_register(deadline_s=0, timeout_s=0.2)
    assert rescuable_reasons() == []
    wait_until(lambda: rescuable_reasons() == ["callback_timeout"], timeout=10)
    assert rescue().rescued == 1
    assert (
        "callback timed out"
        in awa.get_job(scalar("SELECT job_id FROM awa.done_entries")).errors[-1]["message"]
    )


def test_callbacks_never_update_or_delete_queue_ring_rows():
    for _ in range(3):
        noop.enqueue()
    before = table_stats()
    tokens = [claim_and_register(deadline_s=0) for _ in range(3)]
    awa.complete_external(tokens[0], {"ok": 1})
    awa.fail_external(tokens[1], "no")
    awa.heartbeat_callback(tokens[2], 60)
    awa.resume_external(tokens[2], 1)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
    wait_until(
        lambda: (
            sum(
                d[0] for name, d in delta(before, table_stats()).items() if name.startswith("done_")
            )
            >= 2
        )
    )
    changes = delta(before, table_stats())
    rewritten = {
        name: d
        for name, d in changes.items()
        if name.startswith(QUEUE_RING) and (d[1] or d[2] or d[3])
    }
    assert rewritten == {}
    # The lease ring is where callbacks live: registered, updated, deleted on closure.
    leases = [d for name, d in changes.items() if name.startswith("leases_")]
    assert sum(d[0] for d in leases) == 3
    assert sum(d[1] for d in leases) >= 2
