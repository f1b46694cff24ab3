"""The retry backoff of a failed attempt."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from awa_django.conf import AwaSettings


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Exponential backoff with jitter: min(base * 2**(attempt-1), max) + up to jitter * that."""

    base_s: float
    max_s: float
    jitter: float

    @classmethod
    def from_settings(cls, conf: AwaSettings) -> RetryPolicy:
        return cls(
            base_s=conf.RETRY_BACKOFF_BASE_S,
            max_s=conf.RETRY_BACKOFF_MAX_S,
            jitter=conf.RETRY_JITTER,
        )

    def backoff_seconds(self, attempt: int, rng: Callable[[], float]) -> float:
        delay = min(self.base_s * 2.0 ** max(attempt - 1, 0), self.max_s)
        return delay + delay * self.jitter * rng()
