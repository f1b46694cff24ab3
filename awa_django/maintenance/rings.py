"""Ring rotation and prune (leader tasks) for the queue ring and the lease ring.

Each pass makes one rotation attempt and one prune attempt per ring; everything that decides
whether a slot may be sealed or truncated, and the locking, lives in the SQL functions
(``awa.rotate_queue_ring``, ``awa.prune_queue_ring`` and their lease-ring twins). A busy,
locked or retained slot is simply reported and tried again on the next pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from psycopg import AsyncConnection

from awa_django.conf import AwaSettings
from awa_django.maintenance.service import PoolTask, TaskConfig
from awa_django.storage import control
from awa_django.storage.statement import run_async
from awa_django.telemetry import get_telemetry

# An idle system's ring passes back off: a pass that finds the current slot of both rings empty
# (nothing enqueued, nothing claimed since the last rotation: both rotations skipped_idle) and
# prunes nothing doubles the wait before the next pass, up to this many times interval_s; any
# other pass goes back to interval_s. The four no-op calls of each pass were most of what an
# idle fleet's leader cost the server (#37); work that starts meanwhile waits at most that long
# for the ring's first rotation, which nothing else waits for (its rows go to the current slot).
IDLE_BACKOFF_MAX = 8

# Rotations each ring's ledger keeps. Only the newest is read; a busy lease ring rotates about
# once a pass, so an untrimmed ledger would grow by tens of thousands of rows a day.
ROTATIONS_KEPT = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class RingConfig(TaskConfig):
    completed_retention_s: float
    failed_retention_s: float
    lock_timeout_ms: int

    @classmethod
    def from_settings(cls, conf: AwaSettings) -> RingConfig:
        return cls(
            interval_s=conf.RING_INTERVAL_S,
            completed_retention_s=conf.COMPLETED_RETENTION_S,
            failed_retention_s=conf.FAILED_RETENTION_S,
            lock_timeout_ms=conf.RING_LOCK_TIMEOUT_MS,
        )


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

    def describe(self) -> str:
        return (
            f"queue ring {_ring_words(self.queue_rotation, self.queue_prune)}; "
            f"lease ring {_ring_words(self.lease_rotation, self.lease_prune)}"
        )


# What the ring functions answer (sql/functions/rings.sql), in words.
_ROTATION_WORDS: Final = {
    "rotated": "rotated",
    "skipped_idle": "not rotated (its current slot is empty)",
    "skipped_busy": "not rotated (its next slot is not pruned yet)",
    "skipped_locked": "not rotated (another rotation or prune held the lock)",
}
_PRUNE_WORDS: Final = {
    "pruned": "pruned",
    "nothing_to_prune": "nothing to prune",
    "skipped_locked": "prune skipped (its slot was locked)",
    "retention": "prune waits for completed jobs inside their retention",
    "pending_ready": "prune waits for jobs not claimed yet",
    "open_attempt": "prune waits for attempts still open",
}


def _ring_words(rotation: str, prune: str) -> str:
    return (
        f"{_ROTATION_WORDS.get(rotation, rotation)}, "
        f"{_PRUNE_WORDS.get(prune, prune.replace('_', ' '))}"
    )


class RingMaintainer(PoolTask[RingConfig]):
    """Rotates and prunes both rings once per pass; ``interval_s`` grows while both are idle
    (see ``IDLE_BACKOFF_MAX``)."""

    name = "rings"

    async def run_once(self) -> RingResult:
        async with self._pool.connection() as conn:
            queue_rotation, queue_prune = await self._queue_ring(conn)
            lease_rotation, lease_prune = await self._lease_ring(conn)
        get_telemetry().ring_pass(
            rotations=(queue_rotation, lease_rotation).count("rotated"),
            prunes=(queue_prune, lease_prune).count("pruned"),
        )
        result = RingResult(queue_rotation, queue_prune, lease_rotation, lease_prune)
        idle = queue_rotation == lease_rotation == "skipped_idle" and "pruned" not in (
            queue_prune,
            lease_prune,
        )
        self.interval_s = (
            min(self.interval_s * 2, self._config.interval_s * IDLE_BACKOFF_MAX)
            if idle
            else self._config.interval_s
        )
        return result

    async def _queue_ring(self, conn: AsyncConnection[Any]) -> tuple[str, str]:
        """Rotate, then prune, the queue ring: (rotation outcome, prune outcome)."""
        rotation = await run_async(conn, control.rotate_queue_ring(keep=ROTATIONS_KEPT))
        prune = await run_async(
            conn,
            control.prune_queue_ring(
                completed_retention_s=self._config.completed_retention_s,
                failed_retention_s=self._config.failed_retention_s,
                lock_timeout_ms=self._config.lock_timeout_ms,
            ),
        )
        return rotation, prune

    async def _lease_ring(self, conn: AsyncConnection[Any]) -> tuple[str, str]:
        """Rotate, then prune, the lease ring: (rotation outcome, prune outcome)."""
        rotation = await run_async(conn, control.rotate_lease_ring(keep=ROTATIONS_KEPT))
        prune = await run_async(
            conn, control.prune_lease_ring(lock_timeout_ms=self._config.lock_timeout_ms)
        )
        return rotation, prune
