"""Control plane: the maintenance leader lock, ring rotation and prune, retention cleanup, and
the operators' queue controls (pause, resume, live concurrency, drain).

Every function builds a ``Statement`` (or an ``Atomic`` of statements that commit together);
callers run it on their connection (``statement.run`` / ``run_async``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from awa_django.sql import queries
from awa_django.storage.lanes import forget_lanes
from awa_django.storage.statement import (
    Atomic,
    Statement,
    any_row,
    first_bool,
    first_int,
    first_text,
    nothing,
)

_SQL = queries("control")


def try_leader_lock(*, key: int) -> Statement[bool]:
    """Try the session-scoped leader lock on the connection that runs it."""
    return Statement(sql=_SQL["try_leader_lock"], params={"key": key}, read=first_bool)


def release_leader_lock(*, key: int) -> Statement[bool]:
    return Statement(sql=_SQL["release_leader_lock"], params={"key": key}, read=first_bool)


def take_leader_lease(*, key: int, instance_id: str, ttl_s: float) -> Atomic[bool]:
    """Take or renew the leader lease of ``instance_id`` (a runtime_instances row) unless another
    instance holds one younger than ``ttl_s``; one transaction, safe behind a transaction
    pooler."""
    return Atomic(
        (Statement(sql=_SQL["lock_leader_lease"], params={"key": key}, read=nothing),),
        Statement(
            sql=_SQL["take_leader_lease"],
            params={"instance_id": instance_id, "ttl_s": ttl_s},
            read=any_row,
        ),
    )


def release_leader_lease(*, instance_id: str) -> Statement[None]:
    return Statement(
        sql=_SQL["release_leader_lease"], params={"instance_id": instance_id}, read=nothing
    )


PING: Statement[None] = Statement(sql=_SQL["ping"], read=nothing)


def rotate_queue_ring(*, keep: int) -> Statement[str]:
    """One rotation attempt; the ring's ledger keeps its newest ``keep`` generations."""
    return Statement(sql=_SQL["rotate_queue_ring"], params={"keep": keep}, read=first_text)


def prune_queue_ring(
    *, completed_retention_s: float, failed_retention_s: float, lock_timeout_ms: int
) -> Statement[str]:
    params = {
        "completed_retention_s": completed_retention_s,
        "failed_retention_s": failed_retention_s,
        "lock_timeout_ms": lock_timeout_ms,
    }
    return Statement(sql=_SQL["prune_queue_ring"], params=params, read=first_text)


def rotate_lease_ring(*, keep: int) -> Statement[str]:
    """One rotation attempt; the ring's ledger keeps its newest ``keep`` generations."""
    return Statement(sql=_SQL["rotate_lease_ring"], params={"keep": keep}, read=first_text)


def prune_lease_ring(*, lock_timeout_ms: int) -> Statement[str]:
    params = {"lock_timeout_ms": lock_timeout_ms}
    return Statement(sql=_SQL["prune_lease_ring"], params=params, read=first_text)


def delete_expired_dlq(*, retention_s: float, limit: int) -> Statement[int]:
    """Delete one bounded batch of expired DLQ entries; answers how many went."""
    params = {"retention_s": retention_s, "limit": limit}
    return Statement(sql=_SQL["delete_expired_dlq"], params=params, read=first_int)


def delete_expired_terminal_history(*, retention_s: float, limit: int) -> Statement[int]:
    """Delete one bounded batch of failed/cancelled history past its retention."""
    params = {"retention_s": retention_s, "limit": limit}
    return Statement(sql=_SQL["delete_expired_terminal_history"], params=params, read=first_int)


def _forget_lanes(rows: list[Any]) -> None:
    # It dropped every lane: this process must create them again before its producers use them.
    forget_lanes()


def reset_all() -> Statement[None]:
    """Delete every job and put the rings back at genesis (test suites and benchmarks only)."""
    return Statement(sql=_SQL["reset_all"], read=_forget_lanes)


def pause(*, queue: str, by: str) -> Statement[None]:
    return Statement(sql=_SQL["pause_queue"], params={"queue": queue, "by": by}, read=nothing)


def resume(*, queue: str) -> Statement[None]:
    return Statement(sql=_SQL["resume_queue"], params={"queue": queue}, read=nothing)


def set_concurrency(*, queue: str, concurrency: int | None, by: str) -> Statement[None]:
    """Set (or, with None, reset) ``queue``'s live concurrency; its workers are told at commit."""
    params = {"queue": queue, "concurrency": concurrency, "by": by}
    return Statement(sql=_SQL["set_queue_concurrency"], params=params, read=nothing)


def _overrides(rows: list[Any]) -> dict[str, int]:
    return {queue: int(concurrency) for queue, concurrency in rows}


def concurrency_overrides(*, queues: Sequence[str]) -> Statement[dict[str, int]]:
    """The live concurrency operators set, for those of ``queues`` that have one."""
    params = {"queues": list(queues)}
    return Statement(sql=_SQL["queue_concurrency"], params=params, read=_overrides)


def drain_candidates(*, queue: str) -> Statement[int]:
    """How many pending jobs ``drain`` would cancel now, for its confirmation page."""
    return Statement(sql=_SQL["drain_candidates"], params={"queue": queue}, read=first_int)


def drain(*, queue: str, reason: str) -> Statement[int]:
    """Cancel every pending job of ``queue``; answers how many."""
    params = {"queue": queue, "reason": reason}
    return Statement(sql=_SQL["drain_queue"], params=params, read=first_int)
