"""Weighted concurrency: one permit limit per worker process shared by its queues.

How it works: every queue has a minimum (``min_concurrency``) and a ``weight``. A queue "has
work" from the moment its dispatcher asks for permits until a claim comes back with fewer jobs
than it asked for. Free permits are handed out under three rules:

1. capacity is held back for every other queue that has work and runs fewer jobs than its
   minimum, so a reserved queue that gets work takes the next permits that free up;
2. a queue may grow up to its minimum plus its weighted share of what the minimums of the queues
   with work leave over (``min + spare * weight / total weight``);
3. a queue that is alone in having work may use everything: idle capacity is lent.

Permits are never taken back from a running job: a lending queue gives capacity back as its
jobs finish, because from the claim cycle in which the other queue showed work it is held to
its share.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class QueueShare:
    """A queue's place in the shared limit."""

    min_concurrency: int
    weight: int


class WeightedPermits:
    """The shared limit of one process; ``for_queue`` gives each dispatcher its view."""

    def __init__(self, limit: int, shares: Mapping[str, QueueShare]) -> None:
        self.limit = limit
        self._shares = dict(shares)
        self.in_use = dict.fromkeys(shares, 0)
        # Caps operators set live on a queue (awa.queues.set_concurrency).
        self._caps: dict[str, int] = {}
        self._with_work: set[str] = set()
        self._changed = asyncio.Event()

    def for_queue(self, queue: str) -> QueuePermits:
        return QueuePermits(self, queue)

    def _notify(self) -> None:
        # Every waiter holds the event it awaits; a fresh one serves the next round of waiters.
        self._changed.set()
        self._changed = asyncio.Event()

    def set_cap(self, queue: str, cap: int | None) -> None:
        """Hold ``queue`` to at most ``cap`` permits from now on (None: no cap of its own)."""
        if cap is None:
            self._caps.pop(queue, None)
        else:
            self._caps[queue] = cap
        self._notify()

    def cap(self, queue: str) -> int:
        """The most permits ``queue`` may hold while the current set of queues has work."""
        return min(self._weighted_cap(queue), self._caps.get(queue, self.limit))

    def _weighted_cap(self, queue: str) -> int:
        competing = self._with_work | {queue}
        if competing == {queue}:
            return self.limit
        spare = self.limit - sum(self._shares[q].min_concurrency for q in competing)
        total_weight = sum(self._shares[q].weight for q in competing)
        share = self._shares[queue]
        return share.min_concurrency + math.ceil(max(spare, 0) * share.weight / total_weight)

    def _grant(self, queue: str, wanted: int) -> int:
        free = self.limit - sum(self.in_use.values())
        held_back = sum(
            max(0, self._shares[q].min_concurrency - self.in_use[q])
            for q in self._with_work
            if q != queue
        )
        return max(0, min(wanted, free - held_back, self.cap(queue) - self.in_use[queue]))

    async def reserve(self, queue: str, wanted: int, stopping: asyncio.Event) -> int:
        if queue not in self._with_work:
            self._with_work.add(queue)
            # Lending queues must see the new demand before they claim again.
            self._notify()
        while not stopping.is_set():
            if granted := self.try_reserve(queue, wanted):
                return granted
            changed = self._changed
            waiter = asyncio.ensure_future(changed.wait())
            stop = asyncio.ensure_future(stopping.wait())
            try:
                await asyncio.wait([waiter, stop], return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
                stop.cancel()
        return 0

    def try_reserve(self, queue: str, wanted: int) -> int:
        """``reserve`` without waiting, for a queue that already has work: what the rules
        grant now, possibly 0."""
        granted = self._grant(queue, wanted)
        self.in_use[queue] += granted
        return granted

    def release(self, queue: str, n: int) -> None:
        if n:
            self.in_use[queue] -= n
            self._notify()

    def settle(self, queue: str, reserved: int, claimed: int) -> None:
        if claimed < reserved:
            # The claim found less work than permits: this queue has nothing more waiting, so
            # what it does not use may be lent again.
            self._with_work.discard(queue)
        self.release(queue, reserved - claimed)


class QueuePermits:
    """One queue's view of the shared limit, with the interface of ``dispatcher.Permits``."""

    def __init__(self, pool: WeightedPermits, queue: str) -> None:
        self._pool = pool
        self._queue = queue

    async def reserve(self, n: int, stopping: asyncio.Event) -> int:
        """Take between 1 and ``n`` permits as the rules allow, or 0 once ``stopping`` is set."""
        return await self._pool.reserve(self._queue, n, stopping)

    def resize(self, cap: int | None) -> None:
        """Hold this queue to at most ``cap`` permits (None: the shared rules alone)."""
        self._pool.set_cap(self._queue, cap)

    def try_reserve(self, n: int) -> int:
        """Take up to ``n`` permits the rules grant now, without waiting (possibly 0)."""
        return self._pool.try_reserve(self._queue, n)

    def release(self, n: int = 1) -> None:
        self._pool.release(self._queue, n)

    def settle(self, reserved: int, claimed: int) -> None:
        """Give back what a claim did not use; a short claim means the queue ran out of work."""
        self._pool.settle(self._queue, reserved, claimed)
