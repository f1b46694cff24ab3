"""What every system's benchmark handler reports: when each job started and finished.

The handlers of all systems call the same two functions, so pickup latency, duplicates and
the end of a drain are measured the same way for every queue, independent of how each stores
its results. Times are ``time.time()`` (wall clock), comparable between the harness and the
worker process on one machine.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field


@dataclass
class Probe:
    """Handler-side counters of one worker process."""

    starts: list[tuple[int, float]] = field(default_factory=list)
    executions: int = 0
    finished_jobs: set[int] = field(default_factory=set)
    last_finish: float | None = None
    expect: int | None = None
    all_done: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, n: int) -> None:
        # list.append is atomic under the GIL: no lock on the start path, which the latency
        # measurement times.
        self.starts.append((n, time.time()))

    def finish(self, n: int) -> None:
        with self._lock:
            self.executions += 1
            self.finished_jobs.add(n)
            self.last_finish = time.time()
            if self.expect is not None and len(self.finished_jobs) >= self.expect:
                self.all_done.set()


PROBE = Probe()
