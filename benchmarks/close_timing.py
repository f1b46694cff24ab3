"""The server time of ``awa.close_batch`` against the version a migration replaced, shared by
the benchmarks that add work to the close statement (``wait_latency``, ``workflows``): both time
the same batches of open attempts through both versions, interleaved, and roll every close back.
"""

from __future__ import annotations

from typing import Any

# Batches of open attempts a close is timed with: one job, and a worker's full batch.
CLOSE_BATCHES = (1, 100)
# The name the replaced version is created under while it is timed.
PREVIOUS_CLOSE = "awa.close_batch_previous"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def create_previous_close(cursor: Any, migration: str) -> None:
    """``awa.close_batch`` as it was before ``migration``, from that migration's down SQL."""
    from awa_django import sql

    down = sql.migration(migration, "down")
    start = down.index("CREATE OR REPLACE FUNCTION awa.close_batch(")
    definition = down[start : down.index("\n$$;", start) + 4]
    cursor.execute(definition.replace("awa.close_batch(", f"{PREVIOUS_CLOSE}(", 1))


def open_attempts(size: int) -> str:
    """The close parameter of ``size`` claimed attempts, each completing."""
    from django.db import connection

    import awa_django as awa
    from awa_django.core.claimed_job import claimed_job_rows
    from awa_django.core.completion import Completion
    from awa_django.core.outcome import Outcome
    from awa_django.storage.execution import close_params
    from awa_django.storage.queue import ClaimRequest, claim_ready
    from awa_django.storage.statement import run
    from benchmarks.jobs import SYNC_KIND

    for n in range(size):
        awa.enqueue(SYNC_KIND, args={"n": n, "payload": ""})
    with connection.cursor() as cursor:
        request = ClaimRequest(queue="bench", claimed_by="bench", deadline_s=0)
        claimed = run(cursor, claim_ready(request, rows=claimed_job_rows, limit=size))
    assert len(claimed) == size
    return close_params([Completion.of(job, Outcome.COMPLETED) for job in claimed])["batch"]


def execution_ms(cursor: Any, function: str, batch: str) -> float:
    """Server-side time of one close statement, rolled back so the attempts stay open."""
    cursor.execute("BEGIN")
    try:
        cursor.execute(
            f"EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) SELECT * FROM {function}(%s::json)",
            [batch],
        )
        return float(cursor.fetchone()[0][0]["Execution Time"])
    finally:
        cursor.execute("ROLLBACK")


def measure_close(
    reps: int, *, migration: str, previous_label: str
) -> dict[str, dict[str, list[float]]]:
    """Milliseconds of each close, per batch size, of the version before ``migration``
    (``previous_label``) and of this checkout's, interleaved so that noise lands on both alike."""
    from django.db import connection

    from awa_django.testing import reset_queue

    variants = {previous_label: PREVIOUS_CLOSE, "this checkout": "awa.close_batch"}
    samples: dict[str, dict[str, list[float]]] = {}
    with connection.cursor() as cursor:
        create_previous_close(cursor, migration)
        try:
            for size in CLOSE_BATCHES:
                reset_queue()
                batch = open_attempts(size)
                by_variant = samples[f"{size} attempts"] = {name: [] for name in variants}
                for _ in range(reps):
                    for name, function in variants.items():
                        by_variant[name].append(execution_ms(cursor, function, batch))
        finally:
            cursor.execute(f"DROP FUNCTION {PREVIOUS_CLOSE}(json)")
    return samples
