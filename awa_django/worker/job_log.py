"""The log lines of a job's attempt: one when it starts (``-v 3``) and exactly one when it
finishes, whose level says whether an operator needs to look.

A finished line carries kind, id, outcome and duration in its message and, through
``job_extra``, as fields (``outcome``, ``duration_ms``, and ``error`` when there is one), so the
text and JSON formats say the same. Its level:

- DEBUG: completed;
- INFO, no traceback: what the handler asked for (``Snooze``, ``RetryAfter``, ``Cancel``,
  ``TerminalError`` and its subclasses), outcomes the code expects;
- WARNING, no traceback: an unexpected exception with attempts left (it is retried; the
  traceback is stored with the job's errors);
- ERROR with the traceback as ``exc_info``: an unexpected exception that failed the job (an
  unknown kind and an unstorable return value included), so error trackers that hook
  ``logging`` catch it once per job, not once per attempt.
"""

from __future__ import annotations

import logging

from awa_django.core.claimed_job import ClaimedJob
from awa_django.core.outcome import Outcome
from awa_django.exceptions import InvalidReturnValue, JobOutcome
from awa_django.logs import TRACE, job_extra

logger = logging.getLogger(__name__)


def expected(error: BaseException) -> bool:
    """Whether the handler asked for this outcome. An unstorable return value is a
    ``TerminalError`` by type, but a bug of the handler's, not a decision it made."""
    return isinstance(error, JobOutcome) and not isinstance(error, InvalidReturnValue)


def describe(error: BaseException) -> str:
    # An exception whose repr raises must still get its line (and not take the worker down).
    try:
        return repr(error)
    except Exception:
        return f"<{type(error).__qualname__}: repr() failed>"


def failure_level(error: BaseException, outcome: Outcome) -> int:
    """The level of the line of an attempt that did not complete."""
    if expected(error):
        return logging.INFO
    return logging.ERROR if outcome is Outcome.FAILED else logging.WARNING


def log_started(job: ClaimedJob) -> None:
    # Guarded: the extra dict would otherwise be built per job with tracing off.
    if logger.isEnabledFor(TRACE):
        logger.log(
            TRACE,
            "job started kind=%s job_id=%s attempt=%s",
            job.kind,
            job.job_id,
            job.attempt,
            extra=job_extra(job),
        )


def log_finished(
    job: ClaimedJob, error: BaseException | None, outcome: Outcome, duration_s: float
) -> None:
    """The one line of a finished attempt (``error``: what the handler raised or returned)."""
    if error is None:
        # First and on its own: nearly every attempt completes, and below DEBUG this check is
        # all it costs.
        if logger.isEnabledFor(logging.DEBUG):
            duration_ms = round(duration_s * 1000, 3)
            logger.debug(
                "job finished kind=%s job_id=%s outcome=%s duration_ms=%s",
                job.kind,
                job.job_id,
                outcome.value,
                duration_ms,
                extra=job_extra(job, outcome=outcome.value, duration_ms=duration_ms),
            )
        return
    level = failure_level(error, outcome)
    if not logger.isEnabledFor(level):
        return
    duration_ms = round(duration_s * 1000, 3)
    described = describe(error)
    logger.log(
        level,
        "job finished kind=%s job_id=%s outcome=%s duration_ms=%s attempt=%s/%s error=%s",
        job.kind,
        job.job_id,
        outcome.value,
        duration_ms,
        job.attempt,
        job.max_attempts,
        described,
        exc_info=error if level == logging.ERROR else None,
        extra=job_extra(job, outcome=outcome.value, duration_ms=duration_ms, error=described),
    )
