"""The retry backoff of a failed attempt, and of a job no worker that claimed it knew."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from awa_django.conf import AwaSettings

# Longest wait between two tries of a job whose kind the workers that claimed it had no handler
# for: once a worker that knows the kind runs (started by the deploy that brings it), such jobs
# run within about this long.
UNKNOWN_KIND_RETRY_MAX_S: Final = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Exponential backoff with jitter: min(base * 2**(attempt-1), max) + up to jitter * that."""

    base_s: float
    max_s: float
    jitter: float
    # How long a job may wait for a worker that knows its kind, from the first try that met
    # none (AWA["UNKNOWN_KIND_TIMEOUT_S"]); then it fails. 0 fails it at its first try.
    unknown_kind_timeout_s: float

    @classmethod
    def from_settings(cls, conf: AwaSettings) -> RetryPolicy:
        return cls(
            base_s=conf.RETRY_BACKOFF_BASE_S,
            max_s=conf.RETRY_BACKOFF_MAX_S,
            jitter=conf.RETRY_JITTER,
            unknown_kind_timeout_s=conf.UNKNOWN_KIND_TIMEOUT_S,
        )

    def backoff_seconds(self, attempt: int, rng: Callable[[], float]) -> float:
        delay = min(self.base_s * 2.0 ** max(attempt - 1, 0), self.max_s)
        return delay + delay * self.jitter * rng()

    def unknown_kind_delay_s(self, earlier_tries: int, rng: Callable[[], float]) -> float:
        """How long a job no worker knew waits after a try that had ``earlier_tries`` before
        it: the retry backoff's curve, capped at ``UNKNOWN_KIND_RETRY_MAX_S`` (and ``max_s``)."""
        # The exponent is bounded: a wait longer than the cap has long reached it, and a float
        # power past 2**1023 raises OverflowError (a long UNKNOWN_KIND_TIMEOUT_S allows it).
        growth = 2.0 ** min(earlier_tries, 64)
        delay = min(self.base_s * growth, self.max_s, UNKNOWN_KIND_RETRY_MAX_S)
        return delay + delay * self.jitter * rng()
