"""``migrate awa_django zero`` refuses to drop the awa schema while it holds live jobs.

Unapplying migration 0001 drops the schema and every job in it, and Django asks nothing. Django
sends ``pre_migrate`` with the whole plan before it runs any operation, so this receiver can
stop the command first: when the plan unapplies 0001 and the schema still holds jobs that have
not ended (available, scheduled, retryable, running, waiting on a callback) or dead-letter
entries, it raises ``CommandError`` with the counts, unless the environment variable
``AWA_ALLOW_SCHEMA_DROP=1`` says the operator means it.
"""

from __future__ import annotations

import os
from typing import Any, Final

from django.apps import AppConfig
from django.core.management.base import CommandError
from django.db import connections, router
from django.db.migrations import Migration

from awa_django.storage.queue import queue_depths
from awa_django.storage.statement import run

ALLOW_ENV: Final = "AWA_ALLOW_SCHEMA_DROP"
# Only 0001's reverse drops anything; 0002 and 0003 unapply without touching a row.
_DROPS_SCHEMA: Final = ("awa_django", "0001_substrate")
# How the refusal names each live state, in the order of a job's life.
_LIVE: Final = {
    "available": "available",
    "scheduled": "scheduled",
    "retryable": "retryable",
    "running": "running",
    "waiting_external": "waiting on a callback",
    "dlq": "in the dead-letter queue",
}


def _drops_schema(plan: list[tuple[Migration, bool]]) -> bool:
    return any(
        backwards and (migration.app_label, migration.name) == _DROPS_SCHEMA
        for migration, backwards in plan
    )


def refuse_schema_drop(
    sender: AppConfig,
    *,
    using: str,
    plan: list[tuple[Migration, bool]] | None = None,
    **_: Any,
) -> None:
    """``pre_migrate`` receiver: stop a plan that would drop live jobs with the schema."""
    if not plan or not _drops_schema(plan) or not router.allow_migrate(using, "awa_django"):
        return
    if os.environ.get(ALLOW_ENV, "").strip().lower() in {"1", "true", "yes"}:
        return
    with connections[using].cursor() as cursor:
        depths = run(cursor, queue_depths())
    counts = {state: sum(getattr(depth, state) for depth in depths) for state in _LIVE}
    if not any(counts.values()):
        return
    listed = ", ".join(f"{count} {_LIVE[state]}" for state, count in counts.items() if count)
    raise CommandError(
        f"unapplying awa_django 0001_substrate drops the awa schema on database {using!r}, "
        f"which still holds {sum(counts.values())} live jobs ({listed}); nothing was changed. "
        "Drain the queues and purge the dead-letter queue first (docs/operations.md), or run "
        f"again with {ALLOW_ENV}=1 to drop them with the schema."
    )
