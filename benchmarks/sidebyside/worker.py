"""The worker process of every side-by-side measurement, whatever the system.

    python -m benchmarks.sidebyside.worker SYSTEM URL --concurrency C --mode async --report PATH

Prints ``START <wall time>`` just before the system's worker starts, then, every 20 ms while
something changed, ``P <distinct jobs finished> <executions>`` so the harness can follow
progress without querying the system. Runs until SIGTERM (the system's own graceful shutdown),
then writes the probe's record to ``--report`` as JSON.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from pathlib import Path

from benchmarks.sidebyside import systems
from benchmarks.sidebyside.probe import PROBE
from benchmarks.sidebyside.systems.base import TASK_MODES

PROGRESS_INTERVAL_S = 0.02


class _Progress:
    """The progress reporter's view: this process's CPU time when progress last changed."""

    def __init__(self) -> None:
        self.cpu_at_last_change = time.process_time()

    def report(self, stop: threading.Event) -> None:
        last = (-1, -1)
        while not stop.wait(PROGRESS_INTERVAL_S):
            now = (len(PROBE.finished_jobs), PROBE.executions)
            if now != last:
                self.cpu_at_last_change = time.process_time()
                print(f"P {now[0]} {now[1]}", flush=True)
                last = now


def peak_rss_mb() -> float | None:
    """This process's peak resident set (VmHWM). Not the parent's rusage ru_maxrss: Linux
    carries that across exec, so it would include the harness's own size at fork time."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sidebyside.worker")
    parser.add_argument("system", choices=sorted(systems.MODULES))
    parser.add_argument("url")
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--mode", choices=("async", "sync", *TASK_MODES), default="async")
    parser.add_argument("--report", type=Path, required=True)
    args = parser.parse_args(argv)

    # A SIGTERM that lands before the system's worker has installed its own handler (another
    # process of a scale-out can finish a tiny drain that early) would kill this process
    # instead of stopping it gracefully. Until then it is ignored; the harness repeats it.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    system = systems.load(args.system)
    system.prepare_worker(args.url)
    stop = threading.Event()
    progress = _Progress()
    reporter = threading.Thread(target=progress.report, args=(stop,), daemon=True)
    reporter.start()
    started = time.time()
    cpu_at_start = time.process_time()
    print(f"START {started!r}", flush=True)
    system.run_worker(args.url, args.concurrency, args.mode)
    stop.set()
    reporter.join()
    record = {
        "started": started,
        "last_finish": PROBE.last_finish,
        "executions": PROBE.executions,
        "finished_jobs": sorted(PROBE.finished_jobs),
        "starts": PROBE.starts,
        "peak_rss_mb": peak_rss_mb(),
        # CPU seconds (all threads) from START to the last progress change, within one
        # progress interval of the last finish: the work, without imports and shutdown.
        "work_cpu_s": progress.cpu_at_last_change - cpu_at_start,
    }
    args.report.write_text(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
