"""A worker process of the side-by-side benchmark, seen from the harness."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
# A drain or a wait that takes longer than this is stuck, not slow.
WORKER_TIMEOUT_S = 600.0
# An idle worker's graceful shutdown takes well under this.
SIGTERM_REPEAT_S = 10.0


class WorkerHandle:
    """``python -m benchmarks.sidebyside.worker`` running one system's worker."""

    def __init__(self, system: str, url: str, concurrency: int, mode: str = "async") -> None:
        fd, report = tempfile.mkstemp(prefix="sbs-worker-", suffix=".json")
        os.close(fd)
        self.report_path = Path(report)
        self.started: float | None = None
        self.finished_jobs = 0
        self.executions = 0
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmarks.sidebyside.worker",
                system,
                url,
                "--concurrency",
                str(concurrency),
                "--mode",
                mode,
                "--report",
                report,
            ],
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            fields = line.split()
            with self._changed:
                if fields[:1] == ["P"] and len(fields) == 3:
                    self.finished_jobs, self.executions = int(fields[1]), int(fields[2])
                elif fields[:1] == ["START"] and len(fields) == 2:
                    self.started = float(fields[1])
                else:
                    self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_started(self, timeout: float = 60.0) -> None:
        self._wait_for(lambda: self.started is not None, timeout, "start")

    def _wait_for(self, predicate: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise RuntimeError(
                        f"worker did not {what} (exit {self.proc.poll()}):\n" + self.output
                    )
                self._changed.wait(min(left, 0.5))

    @property
    def output(self) -> str:
        return "\n".join(self.lines[-50:])

    def stop(self) -> dict[str, Any]:
        """SIGTERM, wait for the graceful exit; the probe's record plus exit code and peak RSS."""
        deadline = time.monotonic() + 60
        next_signal = 0.0
        # os.wait4 reports the CPU time the child used.
        while True:
            pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                break
            now = time.monotonic()
            if now > deadline:
                self.proc.kill()
                pid, status, usage = os.wait4(self.proc.pid, 0)
                break
            if now >= next_signal:
                # Repeated: the worker ignores SIGTERM until its system's handler is installed.
                # Not sooner than this, as a second SIGTERM makes some systems (awa_django
                # among them) abandon a graceful shutdown still in progress.
                self.proc.send_signal(signal.SIGTERM)
                next_signal = now + SIGTERM_REPEAT_S
            time.sleep(0.05)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self._reader.join(10)
        try:
            record: dict[str, Any] = json.loads(self.report_path.read_text() or "{}")
        finally:
            self.report_path.unlink(missing_ok=True)
        record["exit_code"] = self.proc.returncode
        record["cpu_s"] = usage.ru_utime + usage.ru_stime
        if self.proc.returncode != 0 or "started" not in record:
            record["problem"] = f"worker exited with {self.proc.returncode}:\n{self.output}"
        return record


def machine_busy_s() -> float | None:
    """CPU seconds all cores of this machine have spent busy since boot (neither idle nor
    waiting for I/O), from /proc/stat; None where there is none."""
    try:
        with open("/proc/stat") as stat:
            ticks = [int(v) for v in stat.readline().split()[1:]]
    except OSError:
        return None
    idle, iowait = ticks[3], ticks[4]
    return (sum(ticks) - idle - iowait) / os.sysconf("SC_CLK_TCK")


class MachineBusy:
    """The machine's busy CPU seconds between ``start`` and ``stop``, and their share of every
    core's time then (both None where /proc/stat is missing or ``stop`` never came)."""

    def __init__(self) -> None:
        self.busy_s: float | None = None
        self.share: float | None = None
        self._start: tuple[float, float | None] | None = None

    def start(self) -> None:
        self._start = (time.monotonic(), machine_busy_s())

    def stop(self) -> None:
        assert self._start is not None, "stop() before start()"
        started, busy_before = self._start
        busy_after = machine_busy_s()
        if busy_before is None or busy_after is None:
            return
        self.busy_s = busy_after - busy_before
        self.share = self.busy_s / ((time.monotonic() - started) * (os.cpu_count() or 1))


def wait_for_total(workers: list[WorkerHandle], total: int, timeout: float) -> None:
    """Until the workers together have finished ``total`` distinct jobs."""
    deadline = time.monotonic() + timeout
    while sum(w.finished_jobs for w in workers) < total:
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"only {sum(w.finished_jobs for w in workers)} of {total} jobs finished "
                f"within {timeout:.0f}s"
            )
        for w in workers:
            if w.proc.poll() is not None:
                raise RuntimeError(f"worker exited early ({w.proc.poll()}):\n{w.output}")
        time.sleep(0.01)
