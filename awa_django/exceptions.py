"""Every exception awa_django raises, and the outcome signals handlers raise or return.

Errors sit under ``AwaError`` (never raised directly) and also inherit the builtin they resemble,
so existing ``except ValueError`` / ``except ImproperlyConfigured`` blocks catch them. Outcomes
sit under ``JobOutcome``: they are not errors, they tell the worker what to do with an attempt.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.core.exceptions import ImproperlyConfigured
from django.db import ProgrammingError

from awa_django.limits import delay_problem

if TYPE_CHECKING:
    from awa_django.job_record import JobRecord


class AwaError(Exception):
    """Root of awa_django's errors."""


class InvalidJob(AwaError, ValueError):
    """A job could not be enqueued as given. ``field`` names the value at fault as the caller
    passed it, and the message starts with it: an option (``queue``), or the path of a value
    inside one (``args.items[2].name``, ``args_list[3].user_id``, ``metadata.trace``,
    ``tags[1]``; docs/getting-started.md#validation)."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ConfigError(AwaError, ImproperlyConfigured):
    """The ``AWA`` setting is invalid; ``manage.py check`` reports the same problem with an id."""


class NotMigrated(AwaError, ProgrammingError):
    """awa_django's migrations are not applied on the database a statement ran on (its message
    names the database and the ``migrate`` command to run); a ``ProgrammingError``, the error
    the statement itself raised, which is its ``__cause__``."""


class UnknownDatabase(AwaError, ValueError):
    """An operator call, command or admin page named a database alias that holds no awa queue
    (``AWA["DATABASE_ALIAS"]`` or a queue's ``database``); the message lists those that do."""

    def __init__(self, database: str, databases: tuple[str, ...]) -> None:
        super().__init__(f"database {database!r} holds no awa queue (databases: {list(databases)})")
        self.database = database


class UnknownJobKind(AwaError, LookupError):
    """No handler is registered in this process for a job kind.

    Recorded as the error of a try a worker could not run: the job runs again later without
    using an attempt, until ``AWA["UNKNOWN_KIND_TIMEOUT_S"]`` has passed since the first such
    try (docs/operations.md#jobs-no-worker-knows). ``waiting_since`` and ``tries`` are that
    wait so far, as the job's errors recorded it (None and 0: this try starts it).
    """

    def __init__(
        self, message: str, *, waiting_since: datetime | None = None, tries: int = 0
    ) -> None:
        super().__init__(message)
        self.waiting_since = waiting_since
        self.tries = tries


class JobNotFound(AwaError, LookupError):
    """No committed job has the id ``job_id``: it was never enqueued, its transaction rolled
    back or has not committed yet, or its history was pruned."""

    def __init__(self, message: str, *, job_id: object) -> None:
        super().__init__(message)
        self.job_id = job_id


class JobFailed(AwaError):
    """The job waited on ended without completing: ``record.state`` is ``failed``,
    ``cancelled`` or ``dlq``. ``record`` is its ``JobRecord`` and ``errors`` its error entries,
    oldest first; the message quotes the last one."""

    def __init__(self, record: JobRecord) -> None:
        last = record.errors[-1] if record.errors else {}
        why = last.get("message", last.get("reason", ""))
        ended = f"job {record.job_id} ({record.kind}) ended {record.state}"
        super().__init__(f"{ended}: {why}" if why else ended)
        self.record = record
        self.errors = record.errors


class WaitTimeout(AwaError, TimeoutError):
    """The job waited on had not ended when the timeout ran out. ``record`` is its
    ``JobRecord`` as last read; the job itself goes on."""

    def __init__(self, record: JobRecord, timeout: float) -> None:
        super().__init__(
            f"job {record.job_id} ({record.kind}) still {record.state} after {timeout}s"
        )
        self.record = record


class AttemptRescued(AwaError):
    """Recorded as the error of an attempt the leader rescued (stale heartbeat or deadline)."""


class DeadlineExceeded(BaseException):
    """Raised inside a handler whose attempt ran past its queue's ``deadline_s``, and recorded as
    the attempt's error: the worker running it stops it there (an async handler at the ``await``
    it is in, a sync one at the next line of Python it runs) and closes the attempt only once the
    handler has returned, so the job never runs elsewhere while it still runs here. The attempt
    counts: the job is retried with backoff, or fails when out of attempts.

    A ``BaseException``, as ``asyncio.CancelledError`` and ``KeyboardInterrupt`` are, so that the
    ``except Exception`` blocks of a handler do not swallow it and run on past the deadline."""


class UnstorableAttempt(AwaError):
    """Recorded as the error of an attempt whose result, error, progress or checkpoint the
    database refused to store (the message says which, and why); the job retries with backoff,
    or fails when out of attempts, as after any error. Every other attempt of the same batch is
    written as usual."""


class JobOutcome(Exception):
    """Base of the outcomes a handler can raise (or return) instead of completing normally."""


class RetryAfter(JobOutcome):
    """Retry this job after ``seconds``; the attempt counts against ``max_attempts``."""

    def __init__(self, seconds: float, reason: str = "") -> None:
        problem = delay_problem(seconds)
        if problem is not None:
            raise ValueError(f"RetryAfter seconds {problem}")
        super().__init__(reason or f"retry requested after {seconds}s")
        self.seconds = float(seconds)
        self.reason = reason


class Snooze(JobOutcome):
    """Run this job again after ``seconds`` without using up an attempt."""

    def __init__(self, seconds: float) -> None:
        problem = delay_problem(seconds)
        if problem is not None:
            raise ValueError(f"Snooze seconds {problem}")
        super().__init__(f"snoozed for {seconds}s")
        self.seconds = float(seconds)


class Cancel(JobOutcome):
    """Stop this job for good, as cancelled (not failed), with a reason."""

    def __init__(self, reason: str = "cancelled by handler") -> None:
        super().__init__(reason)
        self.reason = reason


class TerminalError(JobOutcome):
    """Fail this job now, whatever attempts remain. Subclass it for domain errors."""


class InvalidReturnValue(TerminalError):
    """A handler's return value cannot be kept: it is not JSON or exceeds the size cap."""


class CallbackError(AwaError):
    """A callback token cannot be used as asked; the subclasses say why."""


class UnknownCallback(CallbackError, LookupError):
    """The token is malformed or names no attempt that storage knows (HTTP 404)."""


class StaleCallback(CallbackError):
    """The token's attempt closed, or its callback was resolved, resumed or replaced (HTTP 409)."""


class InvalidCallback(CallbackError, ValueError):
    """A callback call has a bad argument (payload, timeout, delay); the message names it."""


class CallbackFailed(AwaError):
    """Recorded as the error of an attempt an outside system reported as failed."""


class WaitForCallback(JobOutcome):
    """Returned (or raised) by a handler to park its attempt until an outside system resolves
    the callback ``token`` (from ``ctx.register_callback``); the worker slot is freed at once."""

    def __init__(self, token: str) -> None:
        super().__init__(f"waiting for callback on attempt token {token.rsplit('-', 1)[0]}")
        self.token = token


class InvalidSchedule(AwaError, ValueError):
    """A periodic schedule cannot be used as declared: bad cron expression, timezone or option.
    ``manage.py check`` reports every one under ``check_id`` (awa.E030-E034)."""

    def __init__(self, message: str, *, check_id: str = "awa.E032") -> None:
        super().__init__(message)
        self.check_id = check_id


class UniqueConflict(AwaError):
    """A unique job with the same key is already in one of the covered states.

    ``job_id`` is the id of the job that holds the key.
    """

    def __init__(self, message: str, *, job_id: int) -> None:
        super().__init__(message)
        self.job_id = job_id


class ConfirmationRequired(AwaError, ValueError):
    """A destructive operator action was called without its filter or confirmation
    (``all=True`` for an unfiltered bulk DLQ action, ``confirm=True`` for a drain)."""
