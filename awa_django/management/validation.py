"""Refusing bad command input before anything is done: names that exist nowhere, ids of no job,
and options the chosen action does not use. Each error names the option as it is typed."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from django.core.management.base import CommandError

from awa_django.conf import get_settings
from awa_django.ops.known import kind_known, queue_known, unknown_queue_message
from awa_django.ops.records import get_jobs


def known_queue(name: str | None, *, option: str, database: str | None = None) -> None:
    """A queue to read or act on: declared, or present in ``database`` (default: its own)
    (``awa_django.ops.known``)."""
    if name is not None and not queue_known(name, database=database):
        raise CommandError(f"{option}: {unknown_queue_message(name)}")


def declared_queue(name: str | None, *, option: str, database: str | None = None) -> None:
    """A queue to put jobs on: only a declared one, which workers of these settings serve,
    living in ``database`` when given (a job stays in its database)."""
    conf = get_settings()
    declared = sorted(conf.QUEUES)
    if name is not None and name not in declared:
        raise CommandError(
            f"{option}: queue {name!r} is not declared in AWA['QUEUES'] (declared: {declared}); "
            "jobs can only be put on a declared queue"
        )
    if name is not None and database is not None and conf.queue_database(name) != database:
        raise CommandError(
            f"{option}: queue {name!r} lives in database {conf.queue_database(name)!r}, the "
            f"jobs in {database!r}: a retry keeps a job in its database"
        )


def known_kind(name: str | None, *, option: str, database: str | None = None) -> None:
    if name is not None and not kind_known(name, database=database):
        raise CommandError(
            f"{option}: unknown job kind {name!r}: no handler registers it and the database "
            "holds no job of it"
        )


def existing_jobs(job_ids: Sequence[int], *, database: str) -> None:
    """Every id names a job ``awa.get_jobs`` finds (any state, the DLQ included) in
    ``database``, the one the command acts on (job ids count per database)."""
    found = get_jobs(job_ids, database=database)
    missing = sorted(set(job_ids) - {record.job_id for record in found})
    several = len(get_settings().databases) > 1
    where = f" in database {database!r}" if several else ""
    if missing:
        raise CommandError(
            f"JOB_ID: no such job: {', '.join(map(str, missing))}{where} (never committed, or "
            "its history was pruned); nothing was done"
        )


def refuse_unused(
    options: Mapping[str, Any], action: str, uses: Mapping[str, tuple[str, Collection[str]]]
) -> None:
    """``uses`` maps an option's dest to (how it is typed, the actions that read it); one given
    to another action is refused rather than silently ignored. Options left out of ``uses``
    apply to every action."""
    for dest, (typed, actions) in uses.items():
        if action not in actions and options.get(dest) not in (None, False, []):
            raise CommandError(f"{typed} does not apply to {action} (only to {', '.join(actions)})")
