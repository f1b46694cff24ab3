"""The invariant audit: ``awa.audit.run()`` and ``manage.py awa_audit``, the first thing to run
after an incident (docs/operations.md#the-invariant-audit).

It reads the substrate in one ``REPEATABLE READ READ ONLY`` transaction, so every invariant is
checked against the same snapshot, takes no lock beyond what any read takes and writes nothing;
producers and workers go on meanwhile. A ring prune that wants a slot the audit is reading waits
for its lock timeout and tries again at its next pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connections, transaction

from awa_django.conf import get_settings
from awa_django.storage import statement
from awa_django.storage.audit import READ_ONLY_SNAPSHOT, Finding, audit


@dataclass(frozen=True, slots=True)
class AuditReport:
    findings: tuple[Finding, ...]

    @property
    def held(self) -> bool:
        return all(f.held for f in self.findings)

    def as_dict(self) -> dict[str, Any]:
        return {
            "held": self.held,
            "invariants": [
                {
                    "name": f.name,
                    "held": f.held,
                    "description": f.description,
                    "broken": f.broken,
                    "unit": f.unit,
                    "ids": list(f.ids),
                    "job_ids": list(f.job_ids),
                }
                for f in self.findings
            ],
        }


def run(using: str | None = None) -> AuditReport:
    """Check every invariant on database ``using`` (``AWA["DATABASE_ALIAS"]`` by default) and
    report each as held or broken; ``UnknownDatabase`` for an alias holding no queue."""
    using = get_settings().operator_database(using)
    connection = connections[using]
    if connection.in_atomic_block:
        # Inside a transaction (a test's) the isolation level is already set: read in it.
        with connection.cursor() as cursor:
            return AuditReport(tuple(statement.run(cursor, check) for check in audit()))
    with transaction.atomic(using=using), connection.cursor() as cursor:
        statement.run(cursor, READ_ONLY_SNAPSHOT)
        return AuditReport(tuple(statement.run(cursor, check) for check in audit()))
