"""The dead-letter queue, for operators: ``awa.dlq.list/get/groups/retry/retry_bulk/purge/
purge_bulk/depth/depths/move_failed``.

A queue opts in with ``AWA["QUEUES"][name]["dlq"] = True``. Its jobs that fail terminally
(attempts exhausted, ``TerminalError``, rescue or callback timeout on the last attempt) are then
held in the DLQ instead of failed history, with their error history and the run_lease of the
attempt that failed, until an operator retries or purges them or ``DLQ_RETENTION_S`` passes.

Every function takes ``database=``, the alias it acts on: by default the database of the
``queue`` it filters on, else ``AWA["DATABASE_ALIAS"]`` (``depths`` adds up every database
holding queues). It runs in its own transaction (or the caller's, when one is open).

Bulk actions need a filter (``queue``, ``kind``, ``reason``, ``older_than``, or a group's
``error_type`` and ``fingerprint``) or an explicit ``all=True``; without either they raise
``ConfirmationRequired`` and change nothing. They commit one batch at a time and call
``progress`` (when given) with the count so far after each batch but the last (whose total
they return), so a long one can show how far it is.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Final, TypedDict, TypeVar, Unpack, cast

from django.db import connections, transaction

from awa_django.conf import PRIORITY_MAX, PRIORITY_MIN, get_settings
from awa_django.declarations.enqueue_options import RunAt, check_int, resolve_run_at
from awa_django.exceptions import ConfirmationRequired, InvalidJob
from awa_django.storage import dlq as storage
from awa_django.storage.dlq import DlqEntry, DlqFilter, DlqGroup, DlqGroups
from awa_django.storage.statement import Atomic, Read, Statement, run, run_atomic, run_read

__all__ = [
    "DlqEntry",
    "DlqGroup",
    "DlqGroups",
    "Match",
    "depth",
    "depths",
    "get",
    "groups",
    "list",
    "match",
    "move_failed",
    "purge",
    "purge_bulk",
    "retry",
    "retry_bulk",
]

# Rows one statement of a bulk action touches; each batch commits on its own.
BULK_BATCH_SIZE: Final = 1000
# Why an entry is held, as the reason filters take it (awa.retry's own moves never stay).
REASONS: Final = ("attempts_exhausted", "terminal_error", "moved_from_failed")
# Entries ``groups`` reads at most, newest first, so grouping costs a bounded scan.
GROUP_SCAN: Final = 10_000
T = TypeVar("T")
Age = timedelta | float | int | None
# Called with how many entries a bulk action has handled so far, after each committed batch
# that more may follow.
Progress = Callable[[int], object] | None


class Match(TypedDict, total=False):
    """Which entries a list, a grouping or a bulk action covers, as its keywords; a missing or
    None one matches everything. ``error_type`` and ``fingerprint`` are those ``groups`` names;
    ``kind_prefix`` and ``error_type_prefix``, in any case, match the start of the name or of
    one of its dotted parts (``"lookup"`` finds ``builtins.LookupError``)."""

    queue: str | None
    kind: str | None
    reason: str | None
    older_than: Age
    error_type: str | None
    fingerprint: str | None
    kind_prefix: str | None
    error_type_prefix: str | None


def _older_than_s(older_than: Age) -> float | None:
    if older_than is None:
        return None
    seconds = older_than.total_seconds() if isinstance(older_than, timedelta) else older_than
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        raise InvalidJob(
            f"older_than must be a timedelta or seconds >= 0, got {older_than!r}",
            field="older_than",
        )
    return float(seconds)


def _queue(name: str | None, *, field: str) -> str | None:
    if name is not None and name not in get_settings().QUEUES:
        raise InvalidJob(
            f"unknown queue {name!r}; declared queues are {sorted(get_settings().QUEUES)}",
            field=field,
        )
    return name


def _filter(match: Match, *, all: bool) -> DlqFilter:
    where = DlqFilter(
        queue=match.get("queue"),
        kind=match.get("kind"),
        reason=match.get("reason"),
        older_than_s=_older_than_s(match.get("older_than")),
        error_type=match.get("error_type"),
        fingerprint=match.get("fingerprint"),
        kind_prefix=match.get("kind_prefix") or None,
        error_type_prefix=match.get("error_type_prefix") or None,
    )
    if where == DlqFilter() and not all:
        raise ConfirmationRequired(
            "a bulk DLQ action needs a filter (queue=, kind=, reason=, older_than=, error_type=,"
            " fingerprint=, kind_prefix=, error_type_prefix=) or all=True"
        )
    return where


def match(where: DlqFilter) -> Match:
    """The keywords covering what ``where`` does (the admin's filter form builds one): its
    fields, by the same names but for the age, which a keyword gives as ``older_than``."""
    keywords = {field.name: getattr(where, field.name) for field in dataclasses.fields(where)}
    keywords["older_than"] = keywords.pop("older_than_s")
    return cast(Match, keywords)


def _read(statement: Statement[T] | Read[T], database: str | None, queue: str | None = None) -> T:
    """``statement`` (or read) run on the operator database (of ``queue``, when given)."""
    with connections[get_settings().operator_database(database, queue=queue)].cursor() as cursor:
        if isinstance(statement, Read):
            return run_read(cursor, statement)
        return run(cursor, statement)


def list(
    *,
    limit: int = 100,
    before: tuple[datetime, int] | None = None,
    database: str | None = None,
    **match: Unpack[Match],
) -> builtins.list[DlqEntry]:
    """Entries newest first, filtered (see ``Match``); page on with
    ``before=(last.dlq_at, last.job_id)``."""
    where = _filter(match, all=True)
    return _read(storage.list_entries(where, limit=limit, before=before), database, where.queue)


def groups(
    *,
    scan: int = GROUP_SCAN,
    limit: int = 100,
    database: str | None = None,
    **match: Unpack[Match],
) -> DlqGroups:
    """The newest ``scan`` matching entries grouped by their last error's type and message
    fingerprint (numbers, ids and hex strings replaced), largest group first; a group's
    ``error_type`` and ``fingerprint`` filter ``list``, ``retry_bulk`` and ``purge_bulk``."""
    where = _filter(match, all=True)
    return _read(storage.group_entries(where, scan=scan, limit=limit), database, where.queue)


def get(job_id: int, *, database: str | None = None) -> DlqEntry | None:
    """The entry of one job, or None when it is not in the DLQ."""
    found = _read(storage.get_entries([job_id]), database)
    return found[0] if found else None


def depth(queue: str | None = None, *, database: str | None = None) -> int:
    """Entries in the DLQ, of one queue (in its database) or of all."""
    if queue is not None:
        database = get_settings().operator_database(database, queue=queue)
    counts = depths(database=database)
    return counts.get(queue, 0) if queue is not None else sum(counts.values())


def depths(*, database: str | None = None) -> dict[str, int]:
    """Entries per queue, in ``database`` or added up over every database holding queues;
    queues with none are left out."""
    counts: dict[str, int] = {}
    for alias in get_settings().operator_databases(database):
        with connections[alias].cursor() as cursor:
            for name, count in run(cursor, storage.depths()).items():
                counts[name] = counts.get(name, 0) + count
    return counts


def retry_options(
    run_at: RunAt, queue: str | None, priority: int | None, *, alias: str
) -> tuple[datetime | None, str | None, int | None]:
    """Validated (run_at, queue, priority) of a retry in database ``alias``; None keeps the
    job's own. A job stays in its database: a queue of another one would strand it where no
    worker of that queue looks."""
    chosen_priority = (
        None
        if priority is None
        else check_int(priority, name="priority", low=PRIORITY_MIN, high=PRIORITY_MAX)
    )
    chosen_queue = _queue(queue, field="queue")
    if chosen_queue is not None:
        holder = get_settings().queue_database(chosen_queue)
        if holder != alias:
            raise InvalidJob(
                f"queue {chosen_queue!r} lives in database {holder!r}, the job in {alias!r}: "
                "a retry keeps a job in its database",
                field="queue",
            )
    return resolve_run_at(run_at), chosen_queue, chosen_priority


def retry(
    job_id: int,
    *,
    run_at: RunAt = None,
    queue: str | None = None,
    priority: int | None = None,
    database: str | None = None,
) -> bool:
    """Put one entry back as a fresh attempt; False when the job is not in the DLQ.

    The job keeps its id and error history; its attempt count starts again and its next
    run_lease is larger than the failed one's. ``run_at`` (datetime or timedelta) defers it;
    ``queue`` / ``priority`` move it to another lane (of the same database).
    """
    alias = get_settings().operator_database(database)
    when, to_queue, to_priority = retry_options(run_at, queue, priority, alias=alias)
    put_back = storage.retry_entries([job_id], run_at=when, queue=to_queue, priority=to_priority)
    return bool(_write(alias, put_back))


def _write(alias: str, statement: Statement[T]) -> T:
    """``statement`` run in its own transaction (a savepoint in the caller's) on ``alias``."""
    with connections[alias].cursor() as cursor:
        return run_atomic(cursor, Atomic(first=(), last=statement))


def _each_matching(
    alias: str,
    where: DlqFilter,
    act: Callable[[builtins.list[int]], Statement[object]],
    progress: Progress,
) -> int:
    """``act`` on every entry ``where`` matches, one committed batch at a time; how many."""
    total = 0
    while True:
        with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
            ids = run_read(cursor, storage.matching_ids(where, limit=BULK_BATCH_SIZE))
            run(cursor, act(ids))
        total += len(ids)
        if len(ids) < BULK_BATCH_SIZE:
            return total
        if progress is not None:
            progress(total)


def retry_bulk(
    *,
    all: bool = False,
    run_at: RunAt = None,
    to_queue: str | None = None,
    priority: int | None = None,
    progress: Progress = None,
    database: str | None = None,
    **match: Unpack[Match],
) -> int:
    """Retry every entry ``match`` covers (see ``retry``); returns how many went back."""
    where = _filter(match, all=all)
    alias = get_settings().operator_database(database, queue=where.queue)
    when, chosen_queue, chosen_priority = retry_options(run_at, to_queue, priority, alias=alias)
    put_back = partial(
        storage.retry_entries, run_at=when, queue=chosen_queue, priority=chosen_priority
    )
    return _each_matching(alias, where, put_back, progress)


def purge(job_id: int, *, database: str | None = None) -> bool:
    """Delete one entry for good; False when the job is not in the DLQ."""
    alias = get_settings().operator_database(database)
    return bool(_write(alias, storage.purge_entries([job_id])))


def purge_bulk(
    *,
    all: bool = False,
    progress: Progress = None,
    database: str | None = None,
    **match: Unpack[Match],
) -> int:
    """Delete every entry ``match`` covers (see ``purge``); returns how many."""
    where = _filter(match, all=all)
    alias = get_settings().operator_database(database, queue=where.queue)
    return _each_matching(alias, where, storage.purge_entries, progress)


def move_failed(
    *,
    queue: str | None = None,
    kind: str | None = None,
    older_than: Age = None,
    all: bool = False,
    job_ids: builtins.list[int] | None = None,
    progress: Progress = None,
    database: str | None = None,
) -> int:
    """Move failed jobs (still in the ring, or in terminal history) into the DLQ, so they can
    be retried; returns how many moved. ``older_than`` counts from when the job failed.
    ``job_ids`` moves exactly those jobs (the ones that are failed); otherwise a filter or
    ``all=True`` is needed. Works whatever the queue's DLQ policy."""
    alias = get_settings().operator_database(database, queue=queue)
    if job_ids is not None:
        return len(_write(alias, _move_failed(job_ids)))
    where = _filter(Match(queue=queue, kind=kind, older_than=older_than), all=all)
    total = 0
    after_id = 0
    while True:
        with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
            ids = run(
                cursor, storage.failed_job_ids(where, after_id=after_id, limit=BULK_BATCH_SIZE)
            )
            total += len(run(cursor, _move_failed(ids)))
        if len(ids) < BULK_BATCH_SIZE:
            return total
        if progress is not None:
            progress(total)
        after_id = ids[-1]


def _move_failed(job_ids: builtins.list[int]) -> Statement[builtins.list[int]]:
    return storage.move_jobs(job_ids, states=["failed"], reason="moved_from_failed")
