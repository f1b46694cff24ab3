"""Per-process token bucket that paces one queue's claims (``rate_limit=(rate, burst)``).

The bucket holds up to ``burst`` tokens and refills at ``rate`` tokens per second; a claim asks
for no more jobs than there are whole tokens and spends one token per job it actually got, so
an empty claim costs nothing. One dispatcher owns each bucket and claims one batch at a time,
so reading the budget and spending it never race. The fleet-wide variant lives in PostgreSQL
(``awa.claim_ready_limited``); this one bounds each worker process separately.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RateLimit:
    """A queue's ``rate_limit`` and where its budget is kept."""

    rate: float  # jobs per second
    burst: int
    fleet: bool  # True: one budget for every worker, in PostgreSQL; False: one per process


class TokenBucket:
    """``rate`` tokens per second, at most ``burst`` saved up; starts full."""

    def __init__(
        self, rate: float, burst: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._updated = clock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._updated) * self.rate)
        self._updated = now

    def available(self) -> int:
        """Whole tokens there are now."""
        self._refill()
        return math.floor(self._tokens)

    def seconds_until_token(self) -> float:
        """How long until at least one whole token is there (0 when there is one now)."""
        self._refill()
        return max(0.0, (1.0 - self._tokens) / self.rate)

    async def budget(self, most: int, stopping: asyncio.Event) -> int:
        """Wait for a token, then return how many jobs a claim may take (at most ``most``);
        0 once ``stopping`` is set."""
        while not stopping.is_set():
            wait_s = self.seconds_until_token()
            if wait_s <= 0:
                return min(most, self.available())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), timeout=wait_s)
        return 0

    def spend(self, jobs: int) -> None:
        """Take one token per claimed job."""
        self._refill()
        self._tokens -= jobs
