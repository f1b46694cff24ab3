"""Ring rotation and prune (leader tasks) for the queue ring and the lease ring.

Each pass makes one rotation attempt and one prune attempt per ring; everything that decides
whether a slot may be sealed or truncated, and the locking, lives in the SQL functions
(``awa.rotate_queue_ring``, ``awa.prune_queue_ring`` and their lease-ring twins). A busy,
locked or retained slot is simply reported and tried again on the next pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg_pool import AsyncConnectionPool

from awa_django.storage import control
from awa_django.telemetry import get_telemetry

# Rotations each ring's ledger keeps. Only the newest is read; a busy lease ring rotates about
# once a pass, so an untrimmed ledger would grow by tens of thousands of rows a day.
ROTATIONS_KEPT = 1000


@dataclass(frozen=True, slots=True)
class RingResult:
    queue_rotation: str
    queue_prune: str
    lease_rotation: str
    lease_prune: str

    @property
    def changed(self) -> bool:
        return "rotated" in (self.queue_rotation, self.lease_rotation) or "pruned" in (
            self.queue_prune,
            self.lease_prune,
        )


class RingMaintainer:
    """Rotates and prunes both rings once per pass."""

    name = "rings"

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        *,
        interval_s: float,
        completed_retention_s: float,
        failed_retention_s: float,
        lock_timeout_ms: int,
    ) -> None:
        self._pool = pool
        self.interval_s = interval_s
        self._completed_retention_s = completed_retention_s
        self._failed_retention_s = failed_retention_s
        self._lock_timeout_ms = lock_timeout_ms

    async def run_once(self) -> RingResult:
        async with self._pool.connection() as conn:
            queue_rotation = await control.rotate_queue_ring(conn, keep=ROTATIONS_KEPT)
            queue_prune = await control.prune_queue_ring(
                conn,
                completed_retention_s=self._completed_retention_s,
                failed_retention_s=self._failed_retention_s,
                lock_timeout_ms=self._lock_timeout_ms,
            )
            lease_rotation = await control.rotate_lease_ring(conn, keep=ROTATIONS_KEPT)
            lease_prune = await control.prune_lease_ring(
                conn, lock_timeout_ms=self._lock_timeout_ms
            )
        get_telemetry().ring_pass(
            rotations=(queue_rotation, lease_rotation).count("rotated"),
            prunes=(queue_prune, lease_prune).count("pruned"),
        )
        return RingResult(queue_rotation, queue_prune, lease_rotation, lease_prune)
