"""The log lines of a job's attempt: one when it starts (``-v 3``) and at most one when it
finishes, whose level says whether an operator needs to look; with ``AWA["JOB_LOG"] =
"summary"``, a line per queue every interval instead of the routine ones.

A finished line carries kind, id, queue, outcome, attempt and duration in its message and,
through ``job_extra``, as fields (``outcome``, ``duration_ms``, and ``error`` when there is
one), so the text and JSON formats say the same. Its outcome is the attempt's, except ``dlq``
for a failure that the queue's ``dlq`` option holds in the dead-letter queue. Its level:

- INFO: completed, and what the handler asked for (``Snooze``, ``RetryAfter``, ``Cancel``,
  ``TerminalError`` and its subclasses), outcomes the code expects; DEBUG instead in summary
  mode, where one INFO line per queue counts them;
- WARNING, no traceback: an unexpected exception with attempts left (it is retried; the
  traceback is stored with the job's errors), and a try of a kind this worker has no handler
  for (snoozed: the job waits for a worker that knows it);
- ERROR with the traceback as ``exc_info``: an unexpected exception that failed the job (a job
  no worker knew the kind of for ``UNKNOWN_KIND_TIMEOUT_S`` and an unstorable return value
  included), so error trackers that hook ``logging`` catch it once per job, not once per
  attempt.

A failure storm must not bury everything else: lines about failed attempts (retried, failed,
dead-lettered, and the tries of a kind no handler here knows) are limited per job kind and
second, the rest counted and reported in one line
per kind, and a traceback identical to one logged within ``TRACEBACK_REPEAT_S`` is not printed
again: the line names the job whose line has it. Tracebacks start at the handler's frame
(``core.tracebacks``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from awa_django.conf import AwaSettings
from awa_django.core import tracebacks
from awa_django.core.claimed_job import ClaimedJob
from awa_django.core.events import wait_for_any
from awa_django.core.outcome import Outcome, OutcomeCounts, outcome_word
from awa_django.exceptions import InvalidReturnValue, JobOutcome
from awa_django.logs import TRACE, job_extra
from awa_django.worker.service import Loop

logger = logging.getLogger(__name__)

# Failure lines are counted in windows this long.
FAILURE_WINDOW_S: Final = 1.0
# An identical failure (``tracebacks.signature``, per kind) prints its traceback again only
# after this long.
TRACEBACK_REPEAT_S: Final = 60.0
# Failures remembered for that; past this many the memory starts afresh, bounding it.
TRACEBACKS_REMEMBERED: Final = 1000
# The outcomes of failed attempts, whose lines the storm limit counts.
_FAILURES: Final = frozenset({Outcome.RETRYABLE, Outcome.FAILED})
_FINISHED: Final = "job finished kind=%s job_id=%s queue=%s outcome=%s attempt=%s/%s duration_ms=%s"


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


@dataclass(frozen=True, slots=True, kw_only=True)
class JobLogConfig:
    """How a process logs its jobs (``AWA["JOB_LOG"]`` and the keys after it)."""

    # Routine lines at DEBUG, and one INFO line per queue every summary_interval_s.
    summary: bool = False
    summary_interval_s: float = 60.0
    # Most failure lines per job kind per FAILURE_WINDOW_S.
    failures_per_s: int = 10
    # Queues whose terminal failures the close statement puts in the dead-letter queue.
    dlq_queues: frozenset[str] = frozenset()

    @classmethod
    def from_settings(cls, conf: AwaSettings) -> JobLogConfig:
        return cls(
            summary=conf.JOB_LOG == "summary",
            summary_interval_s=conf.JOB_LOG_SUMMARY_INTERVAL_S,
            failures_per_s=conf.JOB_LOG_FAILURES_PER_S,
            dlq_queues=conf.dlq_queues,
        )


@dataclass(slots=True)
class _Window:
    """One kind's failure lines in the current window, and those held back."""

    logged: int = 0
    held: Counter[str] = field(default_factory=Counter)
    level: int = logging.NOTSET  # the highest level held back


class JobLog(Loop):
    """The lines of one process's attempts (the loop's thread only: not thread-safe). As a
    service of a process it ticks until stopped, then flushes."""

    name = "job-log"

    def __init__(
        self, config: JobLogConfig, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._summary = config.summary
        self._interval_s = config.summary_interval_s
        self._failures_per_s = config.failures_per_s
        self._dlq = config.dlq_queues
        self._clock = clock
        # Summary mode: attempts finished since the last summary, by queue and outcome word
        # (one counter, not one per queue: a finished attempt counts without a lookup first).
        self._counts: Counter[tuple[str, str]] = Counter()
        self._summary_since = clock()
        self._window_since = clock()
        self._windows: dict[str, _Window] = {}
        # Failure signature -> (job whose line showed its traceback, when).
        self._shown: dict[tuple[object, ...], tuple[int, float]] = {}

    def started(self, job: ClaimedJob) -> None:
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

    def finished(
        self, job: ClaimedJob, error: BaseException | None, outcome: Outcome, duration_s: float
    ) -> None:
        """The line of a finished attempt (``error``: what the handler raised or returned)."""
        if error is None:
            # First and on its own: nearly every attempt completes, and with its level off
            # this is all it costs.
            if self._summary:
                # The member, which is its value: ``.value`` is a property lookup per job.
                self._counts[job.queue, Outcome.COMPLETED] += 1
                level = logging.DEBUG
            else:
                level = logging.INFO
            if logger.isEnabledFor(level):
                self._line(level, job, outcome.value, duration_s)
            return
        word = outcome_word(outcome, dlq=job.queue in self._dlq)
        level = failure_level(error, outcome)
        if self._summary:
            self._counts[job.queue, word] += 1
            if level < logging.WARNING:
                level = logging.DEBUG
        if not logger.isEnabledFor(level):
            return
        # A snooze at WARNING is a try of a kind this worker has no handler for: a worker
        # with a stale JOB_MODULES meets every job of that kind, as in a failure storm.
        failure = outcome in _FAILURES or level >= logging.WARNING
        if failure and not self._admit(job.kind, word, level):
            return
        self._error_line(level, job, word, duration_s, error)

    def _line(
        self,
        level: int,
        job: ClaimedJob,
        word: str,
        duration_s: float,
        message: str = _FINISHED,
        more: Mapping[str, Any] | None = None,
        exc_info: tracebacks.ExcInfo | None = None,
    ) -> None:
        """One finished line; ``more`` adds fields that ``message`` also names, in order."""
        duration_ms = round(duration_s * 1000, 3)
        more = more or {}
        logger.log(
            level,
            message,
            job.kind,
            job.job_id,
            job.queue,
            word,
            job.attempt,
            job.max_attempts,
            duration_ms,
            *more.values(),
            exc_info=exc_info,
            extra=job_extra(job, outcome=word, duration_ms=duration_ms, **more),
        )

    def _error_line(
        self, level: int, job: ClaimedJob, word: str, duration_s: float, error: BaseException
    ) -> None:
        message = _FINISHED + " error=%s"
        more: dict[str, Any] = {"error": describe(error)}
        exc_info: tracebacks.ExcInfo | None = None
        if level >= logging.ERROR:
            shown_in = self._traceback_shown_in(job, error)
            if shown_in is None:
                exc_info = tracebacks.exc_info(error)
            else:
                message += " traceback_as_job_id=%s"
                more["traceback_as_job_id"] = shown_in
        self._line(level, job, word, duration_s, message, more, exc_info)

    def _traceback_shown_in(self, job: ClaimedJob, error: BaseException) -> int | None:
        """The job whose line showed this failure's traceback lately, or None (then this line
        shows it, and is remembered)."""
        key = (job.kind, *tracebacks.signature(error))
        now = self._clock()
        shown = self._shown.get(key)
        if shown is not None and now - shown[1] < TRACEBACK_REPEAT_S:
            return shown[0]
        if len(self._shown) >= TRACEBACKS_REMEMBERED:
            self._shown.clear()
        self._shown[key] = (job.job_id, now)
        return None

    def _admit(self, kind: str, word: str, level: int) -> bool:
        """Whether a failure line of ``kind`` fits this window's limit; counted if not."""
        self._roll(self._clock())
        window = self._windows.get(kind)
        if window is None:
            window = self._windows[kind] = _Window()
        if window.logged < self._failures_per_s:
            window.logged += 1
            return True
        window.held[word] += 1
        window.level = max(window.level, level)
        return False

    def _roll(self, now: float) -> None:
        """Start a new window once this one has passed, reporting what it held back."""
        if now - self._window_since < FAILURE_WINDOW_S:
            return
        self._report_held(now)

    def _report_held(self, now: float) -> None:
        elapsed_s = round(now - self._window_since, 1)
        for kind, window in sorted(self._windows.items()):
            if window.held:
                held = dict(sorted(window.held.items()))
                logger.log(
                    window.level,
                    "job lines suppressed kind=%s count=%s %s window_s=%s limit_per_s=%s",
                    kind,
                    sum(held.values()),
                    " ".join(f"{word}={count}" for word, count in held.items()),
                    elapsed_s,
                    self._failures_per_s,
                    extra={
                        "kind": kind,
                        "count": sum(held.values()),
                        **held,
                        "window_s": elapsed_s,
                        "limit_per_s": self._failures_per_s,
                    },
                )
        self._windows.clear()
        self._window_since = now

    def _report_summary(self, now: float) -> None:
        interval_s = round(now - self._summary_since, 1)
        by_queue: dict[str, Counter[str]] = {}
        for (queue, word), count in self._counts.items():
            by_queue.setdefault(queue, Counter())[word] += count
        for queue, counted in sorted(by_queue.items()):
            counts = OutcomeCounts.of(counted)
            logger.info(
                "jobs finished queue=%s %s interval_s=%s",
                queue,
                counts,
                interval_s,
                extra={"queue": queue, **counts.fields(), "interval_s": interval_s},
            )
        self._counts.clear()
        self._summary_since = now

    def tick(self) -> None:
        """Report what is due: lines held back in a window that has passed, and in summary
        mode the summary once its interval has."""
        now = self._clock()
        self._roll(now)
        if self._summary and now - self._summary_since >= self._interval_s:
            self._report_summary(now)

    def flush(self) -> None:
        """Report everything not reported yet (a process or an in-process run ends)."""
        now = self._clock()
        self._report_held(now)
        if self._summary:
            self._report_summary(now)

    async def stop(self) -> None:
        await super().stop()
        self.flush()

    async def run(self, stopping: asyncio.Event) -> None:
        """``tick`` every window until ``stopping``; the owner flushes after that."""
        while not stopping.is_set():
            await wait_for_any(stopping, timeout=FAILURE_WINDOW_S)
            self.tick()
