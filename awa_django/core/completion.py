"""The completion of an attempt (the storage transition that closes it), and the pure mapping
from a handler's result to it, retry backoff included; it is tested without a database.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol

from awa_django.core.handler_result import HandlerResult
from awa_django.core.outcome import Outcome
from awa_django.core.retry import RetryPolicy
from awa_django.core.tracebacks import format_exception
from awa_django.declarations.exact_json import storable_text
from awa_django.exceptions import Cancel, RetryAfter, Snooze, TerminalError, UnknownJobKind
from awa_django.job_record import WORKFLOW_KEY
from awa_django.storage.execution import ReceiptAddress

TRACEBACK_LINES: Final = 20


class ClosingAttempt(ReceiptAddress, Protocol):
    """What closing an attempt needs to know of it: its receipt address, and the attempt
    counts the retry policy reads (a ``ClaimedJob``, or the ``Completion`` of the attempt)."""

    @property
    def kind(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def max_attempts(self) -> int: ...


# Not frozen: built per finished attempt on the hot path (see ClaimedJob). The close statement
# reads it as a ``storage.execution.CloseItem``.
@dataclass(slots=True, kw_only=True)
class Completion:
    """The result of one attempt, addressed by its receipt and guarded by its run_lease."""

    job_id: int
    run_lease: int
    queue: str
    priority: int
    shard: int
    lane_seq: int
    ready_slot: int
    outcome: Outcome
    # Seconds until a retryable or snoozed job runs again (None otherwise), counted from the
    # database's clock when the completion is written: a worker's own clock may be off.
    delay_s: float | None = None
    # This attempt's error (or cancel reason) as a JSON object.
    error: dict[str, Any] | None = None
    # Progress and checkpoint the attempt reported; None leaves the saved ones unchanged.
    progress: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None
    # A completed attempt's return value as JSON text (a handler's value other than None, or a
    # django.tasks result, made a ``StoredReturn`` in the handler); None stores nothing.
    result_json: str | None = None
    # Carried for signals, metrics and logs, and for closing the attempt another way when the
    # database refuses this completion (never written): saves re-reading the job.
    kind: str = ""
    attempt: int = 0
    max_attempts: int = 0
    # A step of a workflow (its metadata has WORKFLOW_KEY): the close statement then hands it to
    # the workflow's bookkeeping (docs/workflows.md); ordinary jobs are never looked up there.
    workflow: bool = False
    # The step's workflow, from its metadata (None when it does not say): the close statement
    # locks it without looking the step up first.
    workflow_id: int | None = None
    # The steps a completed workflow step added while it ran, as a JSON array (None: none).
    added_steps_json: str | None = None

    @classmethod
    def of(cls, job: ClosingAttempt, outcome: Outcome, **details: Any) -> Completion:
        """The completion of ``job``'s attempt, addressed by its receipt."""
        # A ClaimedJob says whether it is a workflow step in its metadata; a Completion being
        # replaced carries the step's fields.
        metadata = getattr(job, "metadata", None)
        # The address is spelled out, not receipt_address(job): one is built per finished
        # attempt, and the getattr loop and its dict were a measurable part of its cost.
        return cls(
            job_id=job.job_id,
            run_lease=job.run_lease,
            queue=job.queue,
            priority=job.priority,
            shard=job.shard,
            lane_seq=job.lane_seq,
            ready_slot=job.ready_slot,
            outcome=outcome,
            kind=job.kind,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            # Nearly every job names no workflow: decided here, without a call.
            **(
                _NOT_A_STEP
                if metadata is not None and WORKFLOW_KEY not in metadata
                else _step_of(job, metadata)
            ),
            **details,
        )


_NOT_A_STEP: Final[dict[str, Any]] = {}


def _step_of(job: ClosingAttempt, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    if metadata is None:
        if not getattr(job, "workflow", False):
            return _NOT_A_STEP
        return {"workflow": True, "workflow_id": getattr(job, "workflow_id", None)}
    entry = metadata.get(WORKFLOW_KEY)
    if entry is None:
        return _NOT_A_STEP
    workflow_id = entry.get("id") if isinstance(entry, dict) else None
    return {
        "workflow": True,
        "workflow_id": workflow_id if isinstance(workflow_id, int) else None,
    }


def error_entry(exc: BaseException, *, attempt: int, at: datetime) -> dict[str, Any]:
    """One attempt's error as stored in the job's ``errors`` list; its traceback starts at the
    handler (``core.tracebacks``)."""
    lines = format_exception(exc)
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


def completed(job: ClosingAttempt, result: HandlerResult) -> Completion:
    """The completion of an attempt whose handler returned (``result.outcome`` is None): what
    ``result_to_completion`` maps such a result to, for a caller that has checked the outcome
    itself. Success clears progress and checkpoint, and dates nothing, so it needs neither the
    attempt's unsaved progress nor the time: the path nearly every attempt takes."""
    return Completion.of(
        job,
        Outcome.COMPLETED,
        result_json=result.result_json,
        added_steps_json=result.added_steps_json,
    )


def result_to_completion(
    job: ClosingAttempt,
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
        return completed(job, result)

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
    if isinstance(exc, UnknownJobKind):
        return _unknown_kind(job, exc, now=now, policy=policy, rng=rng, close=close)
    error = error_entry(exc, attempt=job.attempt, at=now)
    if isinstance(exc, TerminalError):
        return close(Outcome.FAILED, error=error)
    if job.attempt >= job.max_attempts:
        return close(Outcome.FAILED, error=error)
    if isinstance(exc, RetryAfter):
        return close(Outcome.RETRYABLE, delay_s=exc.seconds, error=error)
    return close(Outcome.RETRYABLE, delay_s=policy.backoff_seconds(job.attempt, rng), error=error)


class _Close(Protocol):
    def __call__(
        self, outcome: Outcome, *, delay_s: float | None = None, error: dict[str, Any] | None = None
    ) -> Completion: ...


def _unknown_kind(
    job: ClosingAttempt,
    exc: UnknownJobKind,
    *,
    now: datetime,
    policy: RetryPolicy,
    rng: Callable[[], float],
    close: _Close,
) -> Completion:
    """A try of a job no handler here knows (awa_django.core.unknown_kinds): snoozed with its
    error recorded (the attempt is given back), or failed once the wait has lasted
    ``policy.unknown_kind_timeout_s``."""
    since = exc.waiting_since or now
    waited_s = max((now - since).total_seconds(), 0.0)
    timeout_s = policy.unknown_kind_timeout_s
    if waited_s >= timeout_s:
        failed = UnknownJobKind(
            f"{exc} No worker that claimed it knew its kind for {waited_s:.0f}s "
            f"(AWA['UNKNOWN_KIND_TIMEOUT_S'] is {timeout_s:g}s): failed."
        )
        entry = error_entry(failed, attempt=job.attempt, at=now) | {"waited_s": waited_s}
        return close(Outcome.FAILED, error=entry)
    delay_s = min(policy.unknown_kind_delay_s(exc.tries, rng), timeout_s - waited_s)
    waiting = UnknownJobKind(
        f"{exc} Tried again in {delay_s:.0f}s without using an attempt; it fails once it has "
        f"waited {timeout_s:g}s (AWA['UNKNOWN_KIND_TIMEOUT_S']) for a worker that knows its kind."
    )
    entry = error_entry(waiting, attempt=job.attempt, at=now) | {
        "waiting_since": since.isoformat(),
        "tries": exc.tries + 1,
    }
    return close(Outcome.SNOOZED, delay_s=delay_s, error=entry)
