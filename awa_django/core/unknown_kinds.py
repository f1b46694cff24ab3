"""Jobs of a kind that the worker which claimed them has no handler for.

Such a job is not failed at once: web code is often deployed before the workers that run its new
kinds, and a worker cannot skip a job and leave it to another (claims follow a cursor per lane).
Each try that meets no handler records an ``UnknownJobKind`` error and puts the job back as
``retryable`` without using an attempt, with a backoff of its own
(``RetryPolicy.unknown_kind_delay_s``), until ``AWA["UNKNOWN_KIND_TIMEOUT_S"]`` has passed since
the first such try: the first try after that fails the job, saying so. The tries of one wait
share one error entry, which each try replaces (``awa.close_batch``), so a job's errors grow by
one entry per wait, not per try; the entry carries ``waiting_since`` and ``tries``, which is how
the next worker knows how long the job has waited. The entry of the try that fails the job
carries ``waited_s`` instead, so a retry of the failed job starts a wait of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from awa_django.declarations.jobs import unknown_kind_hint
from awa_django.exceptions import UnknownJobKind

# An unknown kind's error entry ``type`` (as ``error_entry`` spells a class). The partial index
# awa.deferred_jobs_unknown_kind and the query kinds_nobody_runs (sql/queries/backlog.sql) spell
# it literally: the planner only matches a partial index to a literal.
UNKNOWN_KIND_ERROR_TYPE: Final = f"{UnknownJobKind.__module__}.{UnknownJobKind.__qualname__}"
# The states of a job that waits for a worker that knows its kind: put back by its last try, or
# promoted since and not yet claimed again.
WAITING_STATES: Final = frozenset({"retryable", "available"})


@dataclass(frozen=True, slots=True)
class KindWait:
    """A job's wait for a worker that knows its kind, as its last error entry records it."""

    since: datetime
    tries: int


def kind_wait(errors: Sequence[Any]) -> KindWait | None:
    """The wait the job with these ``errors`` is in, or None (its last error is not a try of
    an unknown kind, or the try failed the job)."""
    last = errors[-1] if errors else None
    if not isinstance(last, dict) or last.get("type") != UNKNOWN_KIND_ERROR_TYPE:
        return None
    try:
        since = datetime.fromisoformat(last["waiting_since"])
        tries = int(last["tries"])
    except (KeyError, TypeError, ValueError):
        return None
    # A naive time cannot be compared with a worker's clock; read as no wait, it starts anew.
    return KindWait(since, tries) if since.tzinfo is not None else None


def waits_for_kind(state: str, errors: Sequence[Any]) -> bool:
    """Whether a job in ``state`` with ``errors`` waits because no worker that claimed it knew
    its kind (the admin and the commands say so)."""
    return state in WAITING_STATES and kind_wait(errors) is not None


def unknown_kind(kind: str, errors: Sequence[Any]) -> UnknownJobKind:
    """The error of a try of a job of ``kind`` (with ``errors`` so far) that this worker has no
    handler for, carrying the wait it continues."""
    wait = kind_wait(errors)
    return UnknownJobKind(
        f"unknown job kind {kind!r}: no handler registered in this worker. "
        f"{unknown_kind_hint(kind)}",
        waiting_since=None if wait is None else wait.since,
        tries=0 if wait is None else wait.tries,
    )
