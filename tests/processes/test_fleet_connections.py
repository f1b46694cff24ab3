"""A worker process holds its session connection (LISTEN, wake locks, leader lock) and its pool
for claims, completions and maintenance passes (AWA["WORKER_POOL_SIZE"], 2 by default), whatever
its concurrency and number of queues (issue #37): three server connections, or two with a pool
of one."""

from __future__ import annotations

import json
import signal
import time
from collections import Counter

import pytest

import awa_django as awa
from tests.conftest import wait_until
from tests.fleet import backends
from tests.jobs import nap

QUEUES = ("default", "email", "partners")


def peak_while_busy(worker, jobs: list[int], before: Counter[str]) -> Counter[str]:
    """The most connections seen (by application_name) while the worker runs the jobs, beyond
    those open ``before`` it started (another test's connection may still be closing)."""
    peak: Counter[str] = Counter()

    def sample() -> bool:
        now = backends() - before
        for name, count in now.items():
            peak[name] = max(peak[name], count)
        done = {job.state for job in awa.get_jobs(jobs)} == {"completed"}
        return done or worker.proc.poll() is not None

    wait_until(sample, timeout=60, interval=0.05)
    return peak


@pytest.mark.parametrize(
    ("queue_count", "concurrency", "pool_size"), [(1, 1, 2), (3, 64, 2), (3, 64, 1)]
)
def test_a_worker_holds_its_session_and_its_pool(
    worker_process, queue_count, concurrency, pool_size
):
    queues = QUEUES[:queue_count]
    jobs = [
        awa.enqueue(nap, args={"seconds": 0.5}, queue=queue) for queue in queues for _ in range(4)
    ]
    before = backends()
    overrides = {"POLL_INTERVAL_S": 0.2, "WORKER_POOL_SIZE": pool_size}
    worker = worker_process(
        *[f"--queue={queue}={concurrency}" for queue in queues],
        env={"AWA_OVERRIDES": json.dumps(overrides)},
    ).wait_ready()

    peak = peak_while_busy(worker, jobs, before)

    print("connections", queue_count, concurrency, dict(peak), dict(before))
    assert {job.state for job in awa.get_jobs(jobs)} == {"completed"}, worker.output[-3000:]
    assert peak["awa_worker_session"] == 1, (peak, worker.output[-3000:])
    assert peak["awa_worker"] <= pool_size, (peak, worker.output[-3000:])
    # The handlers ran no ORM code, and the worker uses no Django connection of its own.
    assert set(peak) <= {"awa_worker", "awa_worker_session"}, peak


def test_awa_maintenance_holds_two_and_a_poll_only_worker_its_pool_alone(worker_process):
    before = backends()
    maintenance = worker_process(command="awa_maintenance").wait_ready()
    wait_until(lambda: "became maintenance leader" in maintenance.output)
    time.sleep(0.5)
    assert backends() - before == Counter({"awa_worker": 1, "awa_worker_session": 1})
    maintenance.proc.send_signal(signal.SIGTERM)
    assert maintenance.wait() == 0
    wait_until(lambda: not backends() - before)

    # Poll-only: no session connection at all.
    jobs = [awa.enqueue(nap, args={"seconds": 0.2}, queue="default") for _ in range(8)]
    worker = worker_process(
        "--queue=default=8",
        env={"AWA_OVERRIDES": json.dumps({"WORKER_SESSION": False, "POLL_INTERVAL_S": 0.2})},
    ).wait_ready()
    peak = peak_while_busy(worker, jobs, before)
    assert {job.state for job in awa.get_jobs(jobs)} == {"completed"}, worker.output[-3000:]
    assert peak == Counter({"awa_worker": 2}), peak
