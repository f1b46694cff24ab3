"""The invariant audit's reads (``sql/queries/audit.sql``): one statement per invariant, each
answering how many jobs (or ring generations, or workflows: the invariant's unit) break it and
the first 100 of their ids."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from awa_django.sql import queries
from awa_django.storage.statement import Statement, nothing

_SQL = queries("audit")

# The invariants in the order they are reported: (name, its statement, what holds when it
# holds, what its ids name).
INVARIANTS: Final[tuple[tuple[str, str, str, str], ...]] = (
    (
        "one_place",
        "audit_one_place",
        "every job is in at most one live place: ready, claimed with an open receipt, "
        "deferred, or in the DLQ",
        "job",
    ),
    (
        "one_open_attempt",
        "audit_one_open_attempt",
        "no job has two open attempts, and every heartbeat lease belongs to an open one",
        "job",
    ),
    (
        "published",
        "audit_published",
        "every committed ready row is in its lane's order (a lane commit covers it)",
        "job",
    ),
    (
        "claimable",
        "audit_claimable",
        "no unclaimed row lies behind its lane's cursor outside a recorded hole "
        "(no hole that never closes)",
        "job",
    ),
    (
        "ring_cursor",
        "audit_ring_cursor",
        "each ring has exactly one current slot, and its retained generations are consecutive, "
        "each on the slot after the one before",
        "generation",
    ),
    (
        "ring_slots",
        "audit_ring_slots",
        "every queue-ring row was written in its slot's current lap, and every receipt, "
        "closure and tombstone sits in the slot of its ready row",
        "job",
    ),
    (
        "unique_claims",
        "audit_unique_claims",
        "every unique claim names an issued job of its kind, and no job holds two keys",
        "job",
    ),
    (
        "workflow_steps",
        "audit_workflow_steps",
        "every held workflow step counts exactly its unfinished dependencies, none failed "
        "under it, and none left at zero unreleased",
        "job",
    ),
    (
        "workflow_state",
        "audit_workflow_state",
        "every running workflow counts its unended steps right and still has one to end",
        "workflow",
    ),
)


@dataclass(frozen=True, slots=True)
class Finding:
    """One invariant as the audit found it: held when ``broken`` is 0; ``ids`` lists the first
    100 of what breaks it, which ``unit`` names: ``"job"`` (job ids), ``"generation"`` (ring
    ledger generations) or ``"workflow"`` (workflow ids)."""

    name: str
    description: str
    broken: int
    ids: tuple[int, ...]
    unit: str = "job"

    @property
    def job_ids(self) -> tuple[int, ...]:
        """The job ids concerned: ``ids`` when they name jobs, else none."""
        return self.ids if self.unit == "job" else ()

    @property
    def held(self) -> bool:
        return self.broken == 0


# Every invariant read from one snapshot, writing nothing (the first statement of a transaction).
READ_ONLY_SNAPSHOT: Final[Statement[None]] = Statement(sql=_SQL["read_only_snapshot"], read=nothing)


def _finding(name: str, description: str, unit: str, rows: list[Any]) -> Finding:
    ((broken, ids),) = rows  # an aggregate always answers one row
    return Finding(name, description, int(broken), tuple(int(i) for i in ids), unit)


def audit() -> tuple[Statement[Finding], ...]:
    """One statement per invariant, in report order; the caller runs them in its (read-only)
    transaction."""
    return tuple(
        Statement(sql=_SQL[block], read=partial(_finding, name, description, unit))
        for name, block, description, unit in INVARIANTS
    )
