"""The pure mapping from a handler's result to the storage transition that closes its attempt,
retry backoff included; it is tested without a database.
"""

from __future__ import annotations

import random
import traceback
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final

from awa_django.core.handler_result import HandlerResult
from awa_django.core.retry import RetryPolicy
from awa_django.exact_json import storable_text
from awa_django.exceptions import Cancel, RetryAfter, Snooze, TerminalError, UnknownJobKind
from awa_django.storage.execution import Attempt, Completion, Outcome

TRACEBACK_LINES: Final = 20


def error_entry(exc: BaseException, *, attempt: int, at: datetime) -> dict[str, Any]:
    """One attempt's error as stored in the job's ``errors`` list."""
    lines = traceback.format_exception(exc)
    return {
        "attempt": attempt,
        "at": at.isoformat(),
        "type": storable_text(f"{type(exc).__module__}.{type(exc).__qualname__}"),
        "message": storable_text(_message(exc)),
        "traceback": storable_text("".join(lines[-TRACEBACK_LINES:])),
    }


def _message(exc: BaseException) -> str:
    # An exception whose __str__ raises must still close its attempt (traceback formatting
    # copes with it the same way).
    try:
        return str(exc)
    except Exception:
        return f"<{type(exc).__qualname__}: str() failed>"


def result_to_completion(
    job: Attempt,
    result: HandlerResult,
    *,
    now: datetime,
    policy: RetryPolicy,
    rng: Callable[[], float] = random.random,
    progress: dict[str, Any] | None = None,
    checkpoint: dict[str, Any] | None = None,
) -> Completion:
    """Map a handler result to the storage transition that closes the attempt.

    ``now`` dates the error entries; when a retried or snoozed job runs again is a delay, which
    the database adds to its own clock. ``progress``/``checkpoint`` are what the attempt
    reported and not yet flushed; they are saved for the next attempt unless the job completed
    (success clears them).
    """
    exc = result.outcome
    if exc is None:
        # Success clears progress and checkpoint. First and without the helper below: this is
        # the path nearly every attempt takes.
        return Completion.of(job, Outcome.COMPLETED, result_json=result.result_json)

    def close(
        outcome: Outcome, *, delay_s: float | None = None, error: dict[str, Any] | None = None
    ) -> Completion:
        return Completion.of(
            job, outcome, delay_s=delay_s, error=error, progress=progress, checkpoint=checkpoint
        )

    if isinstance(exc, Snooze):
        return close(Outcome.SNOOZED, delay_s=exc.seconds)
    if isinstance(exc, Cancel):
        return close(
            Outcome.CANCELLED,
            error={
                "attempt": job.attempt,
                "at": now.isoformat(),
                "reason": storable_text(str(exc.reason)),
            },
        )
    error = error_entry(exc, attempt=job.attempt, at=now)
    if isinstance(exc, TerminalError | UnknownJobKind):
        return close(Outcome.FAILED, error=error)
    if job.attempt >= job.max_attempts:
        return close(Outcome.FAILED, error=error)
    if isinstance(exc, RetryAfter):
        return close(Outcome.RETRYABLE, delay_s=exc.seconds, error=error)
    return close(Outcome.RETRYABLE, delay_s=policy.backoff_seconds(job.attempt, rng), error=error)
