"""The invariant audit's reads (``sql/queries/audit.sql``): one statement per invariant, each
answering how many jobs break it and the first 100 of their ids."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from django.db.backends.utils import CursorWrapper

from awa_django.sql import queries

_SQL = queries("audit")

# The invariants in the order they are reported: (name, its statement, what holds when it
# holds).
INVARIANTS: Final[tuple[tuple[str, str, str], ...]] = (
    (
        "one_place",
        "audit_one_place",
        "every job is in at most one live place: ready, claimed with an open receipt, "
        "deferred, or in the DLQ",
    ),
    (
        "one_open_attempt",
        "audit_one_open_attempt",
        "no job has two open attempts, and every heartbeat lease belongs to an open one",
    ),
    (
        "published",
        "audit_published",
        "every committed ready row is in its lane's order (a lane commit covers it)",
    ),
    (
        "claimable",
        "audit_claimable",
        "no unclaimed row lies behind its lane's cursor outside a recorded hole "
        "(no hole that never closes)",
    ),
)


@dataclass(frozen=True, slots=True)
class Finding:
    """One invariant as the audit found it: held when ``broken`` is 0; ``job_ids`` lists the
    first 100 jobs that break it."""

    name: str
    description: str
    broken: int
    job_ids: tuple[int, ...]

    @property
    def held(self) -> bool:
        return self.broken == 0


def audit(cursor: CursorWrapper) -> list[Finding]:
    """Check every invariant with ``cursor``, in the caller's (read-only) transaction."""
    findings = []
    for name, block, description in INVARIANTS:
        cursor.execute(_SQL[block])
        row = cursor.fetchone()
        assert row is not None  # an aggregate always answers
        findings.append(Finding(name, description, int(row[0]), tuple(int(i) for i in row[1])))
    return findings
