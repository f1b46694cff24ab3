"""Resolving callbacks from outside the worker: views, webhooks, shells, other jobs.

Each call takes a token, locks its callback's lease, checks that the callback still waits, and
acts in the caller's database transaction (so a webhook can update its own rows and resolve the
job atomically; on an error nothing is written). Complete, fail and retry close the attempt
through the same run_lease-guarded statement a worker uses, with the same retry policy, so a
callback resolves at most once and loses cleanly to a rescue or cancel that closed it first.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, Final, TypeVar

from asgiref.sync import async_to_sync
from django.db import OperationalError, connections, transaction
from django.db.backends.utils import CursorWrapper
from django.urls import reverse

from awa_django.callbacks.tokens import describe, parse_token
from awa_django.conf import get_settings
from awa_django.core.claimed_job import ClaimedJob, claimed_job_rows
from awa_django.core.closed_attempts import report_closed
from awa_django.core.completion import result_to_completion
from awa_django.core.handler_result import HandlerResult, capped_json
from awa_django.core.retry import RetryPolicy
from awa_django.declarations.exact_json import has_lone_surrogate
from awa_django.exceptions import (
    CallbackFailed,
    InvalidCallback,
    RetryAfter,
    StaleCallback,
    UnknownCallback,
)
from awa_django.limits import MAX_SECONDS
from awa_django.storage.callbacks import (
    CallbackRef,
    extend_callback,
    lock_callback,
    resume_callback,
)
from awa_django.storage.execution import close_attempts, notify_cancel
from awa_django.storage.statement import run

ACTIONS: Final = ("complete", "fail", "retry", "heartbeat", "resume")
# PostgreSQL's deadlock_detected: a worker closing the same attempt the other way round.
_DEADLOCK: Final = "40P01"

T = TypeVar("T")


def status_error(status: str, ref: CallbackRef) -> UnknownCallback | StaleCallback:
    """The error for a callback that is not ``waiting`` (a status of awa.callback_status)."""
    name = describe(ref)
    if status == "unknown":
        return UnknownCallback(f"no such attempt: {name} (unknown token, or history pruned)")
    if status.startswith("closed:"):
        return StaleCallback(f"{name} is stale: the attempt already closed as {status[7:]}")
    if status == "resumed":
        return StaleCallback(f"{name} was already resumed; its handler has not taken it yet")
    return StaleCallback(f"{name} is stale: it was resolved, resumed or replaced by a newer one")


def seconds(value: timedelta | float, *, name: str, allow_zero: bool) -> float:
    """``value`` (a timedelta or seconds) as seconds up to ``MAX_SECONDS``, else
    ``InvalidCallback``."""
    number = value.total_seconds() if isinstance(value, timedelta) else value
    # The range test also refuses NaN and infinities, and compares an int too large for a float
    # exactly (math.isfinite would raise OverflowError on it).
    if (
        isinstance(number, bool)
        or not isinstance(number, int | float)
        or not 0 <= number <= MAX_SECONDS
        or (number == 0 and not allow_zero)
    ):
        bound = ">= 0" if allow_zero else "> 0"
        # reprlib shortens the echo of an integer of a thousand digits.
        raise InvalidCallback(
            f"{name} must be a timedelta or seconds {bound} and at most {MAX_SECONDS} "
            f"(100 years), got {reprlib.repr(value)}"
        )
    return float(number)


def _in_transaction(token: str, act: Callable[[CursorWrapper, CallbackRef, ClaimedJob], T]) -> T:
    """Lock ``token``'s callback and run ``act`` on it while it still waits, atomically."""
    ref = parse_token(token)
    alias = get_settings().DATABASE_ALIAS
    try:
        with transaction.atomic(using=alias), connections[alias].cursor() as cursor:
            locked = run(cursor, lock_callback(ref, rows=claimed_job_rows))
            if locked.job is None:
                raise status_error(locked.status, ref)
            return act(cursor, ref, locked.job)
    except OperationalError as exc:
        # We lost a deadlock to a closer that takes locks the other way round (a worker
        # completing the attempt itself, or a cancel): that closer wins and we changed nothing.
        if getattr(exc.__cause__, "sqlstate", None) == _DEADLOCK:
            raise StaleCallback(f"{describe(ref)} was closed concurrently") from exc
        raise


def _close(token: str, result: HandlerResult) -> str:
    conf = get_settings()

    def close(cursor: CursorWrapper, ref: CallbackRef, job: ClaimedJob) -> str:
        completion = result_to_completion(
            job, result, now=datetime.now(UTC), policy=RetryPolicy.from_settings(conf)
        )
        closed = run(cursor, close_attempts([completion]))
        if not closed:
            raise StaleCallback(f"{describe(ref)} was closed concurrently")
        # A sequential handler still waiting on this attempt learns that it is over.
        run(cursor, notify_cancel(sorted(closed)))
        transaction.on_commit(
            partial(async_to_sync(report_closed), [completion], closed, rescue_reasons={}),
            using=conf.DATABASE_ALIAS,
        )
        return completion.outcome.value

    return _in_transaction(token, close)


def complete_external(token: str, payload: Any = None) -> str:
    """Complete the waiting attempt of ``token``; a non-None JSON ``payload`` (up to 64 KiB) is
    kept as the job's result. Returns ``"completed"``."""
    kept = None if payload is None else capped_json(payload, field="payload", error=InvalidCallback)
    return _close(token, HandlerResult(result_json=kept))


def fail_external(token: str, error: str) -> str:
    """Record ``error`` as the attempt's failure: the job retries with backoff, or fails once out
    of attempts. Returns ``"retryable"`` or ``"failed"``."""
    if not isinstance(error, str) or not error.strip():
        raise InvalidCallback(f"error must be a non-empty string, got {error!r}")
    if has_lone_surrogate(error):
        raise InvalidCallback(
            "error contains a lone surrogate (\\ud800-\\udfff), which is not Unicode text"
        )
    return _close(token, HandlerResult(CallbackFailed(error)))


def retry_external(token: str, delay: timedelta | float = 0.0) -> str:
    """Close the attempt and run the job again after ``delay`` (counts as an attempt: fails once
    out of attempts). Returns ``"retryable"`` or ``"failed"``."""
    delay_s = seconds(delay, name="delay", allow_zero=True)
    return _close(token, HandlerResult(RetryAfter(delay_s, "retry requested by external callback")))


def heartbeat_callback(token: str, timeout: timedelta | float) -> datetime:
    """Keep waiting: the callback now times out ``timeout`` from now. Returns the new timeout."""
    timeout_s = seconds(timeout, name="timeout", allow_zero=False)

    def extend(cursor: CursorWrapper, ref: CallbackRef, job: ClaimedJob) -> datetime:
        return run(cursor, extend_callback(ref, timeout_s=timeout_s))

    return _in_transaction(token, extend)


def resume_external(token: str, payload: Any = None) -> None:
    """Wake the handler waiting in ``ctx.wait_for_callback(token)``, which returns ``payload``
    (JSON, up to 64 KiB) and carries on in the same attempt."""
    text = capped_json(payload, field="payload", error=InvalidCallback)

    def resume(cursor: CursorWrapper, ref: CallbackRef, job: ClaimedJob) -> None:
        if not run(cursor, resume_callback(ref, text)):
            raise StaleCallback(
                f"{describe(ref)} is parked (its handler returned WaitForCallback): nothing waits "
                "for a payload; resolve it with complete, fail or retry"
            )

    _in_transaction(token, resume)


def callback_url(token: str, action: str = "complete") -> str:
    """Where an outside system POSTs to resolve ``token``: ``AWA["CALLBACK_BASE_URL"]`` and the
    path of the ``awa_django.urls`` endpoint (just the path when no base URL is set)."""
    if action not in ACTIONS:
        raise InvalidCallback(f"action must be one of {list(ACTIONS)}, got {action!r}")
    parse_token(token)
    path = reverse("awa_django:callback", kwargs={"token": token, "action": action})
    return get_settings().CALLBACK_BASE_URL.rstrip("/") + path
