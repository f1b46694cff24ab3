"""A lane's first use stalls nothing (docs/architecture.md, "Lanes are created outside
producers' transactions"), with real producer and worker processes.

Producer processes each enqueue the first job ever of a lane, publish it early (Django's
``connection.check_constraints()``, ``SET CONSTRAINTS ALL IMMEDIATE``) and keep their
transactions open for 20 s: one to commit in the end, one to roll back, and one that enqueues
in raw SQL (``awa.enqueue_job``), whose commit therefore creates its lane inside its own
transaction. Meanwhile this process commits jobs to the first two's lanes and to lanes nobody
used before (through the Python API and in raw SQL): every enqueue returns at once and every job
runs within the normal pickup time. At the end the late commits' jobs run once each, the rolled
back one never, and the invariant audit holds.
"""

from __future__ import annotations

import json
import os
import queue as queue_module
import subprocess
import sys
import threading
import time

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test import override_settings

import awa_django as awa
from awa_django.ops import audit
from tests.conftest import REPO_ROOT, subprocess_database_url, wait_until

HOLD_S = 20.0
FRESH = [f"fresh_{i}" for i in range(4)]
QUEUES = ["default", "first_use", "first_use_doomed", "first_use_raw", *FRESH, "fresh_raw"]
OVERRIDES = {"QUEUES": {queue: {"concurrency": 4} for queue in QUEUES}}

HELD = """
import json, sys
import awa_django as awa
from django.conf import settings
from django.db import connection, transaction
from django.test import override_settings
with transaction.atomic():
    if {raw}:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT awa.enqueue_job('tests.record', %s, 2::smallint, '{{}}'::jsonb, 3,"
                " NULL, '{{}}'::jsonb, '{{}}'::text[])",
                [{queue!r}],
            )
            job_id = cursor.fetchone()[0]
    else:
        job_id = awa.enqueue("tests.record", args={{"n": -1}}, queue={queue!r})
    connection.check_constraints()  # publishes early: the lane position is drawn now
    print(json.dumps(job_id), flush=True)
    if sys.stdin.readline().strip() != "commit":
        transaction.set_rollback(True)
print("ended", flush=True)
"""


class HeldProducer:
    """A ``manage.py shell`` process that enqueues the first job of ``queue``, publishes it early
    and holds its transaction open until ``end``."""

    def __init__(self, queue: str, started: list[HeldProducer], *, raw: bool = False) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "shell", "-c", HELD.format(queue=queue, raw=raw)],
            cwd=REPO_ROOT,
            env={
                **os.environ,
                "DATABASE_URL": subprocess_database_url(),
                "AWA_JOB_MODULES": "tests.jobs",
                "AWA_OVERRIDES": json.dumps(OVERRIDES),
            },
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append(self)
        self.lines: queue_module.Queue[str] = queue_module.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        # After what the shell says as it starts. A producer that waits for another's
        # transaction (a lane's creation, before #35) never gets there.
        while not (line := self._line()).isdigit():
            pass
        self.job_id = int(line)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())

    def _line(self) -> str:
        try:
            return self.lines.get(timeout=15)
        except queue_module.Empty:
            raise AssertionError("the producer is stuck, or ended before it enqueued") from None

    def end(self, how: str) -> None:
        assert self.proc.poll() is None, "the held producer ended early"
        assert self.proc.stdin is not None
        self.proc.stdin.write(how + "\n")
        self.proc.stdin.flush()
        assert self._line() == "ended"
        assert self.proc.wait(30) == 0

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def runs() -> dict[int, tuple[int, float]]:
    """job id -> (times it ran, epoch of its first run)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT job_id, count(*), extract(epoch FROM min(at))::float FROM tests_job_runs"
            " WHERE job_id IS NOT NULL GROUP BY 1"
        )
        return {row[0]: (row[1], row[2]) for row in cursor.fetchall()}


def raw_enqueue(queue: str, n: int) -> int:
    """The first job of a lane in raw SQL, in a transaction of its own: its commit creates the
    lane."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT awa.enqueue_job('tests.record', %s, 2::smallint, %s::jsonb, 3, NULL,"
            " '{}'::jsonb, '{}'::text[])",
            [queue, json.dumps({"n": n})],
        )
        return int(cursor.fetchone()[0])


@override_settings(AWA={**settings.AWA, **OVERRIDES})
@pytest.mark.fault_injection
def test_transactions_holding_a_lanes_first_job_stall_neither_that_lane_nor_new_ones(
    worker_process,
):
    worker_process(env={"AWA_OVERRIDES": json.dumps(OVERRIDES)}).wait_ready()
    with connection.cursor() as cursor:
        # A commit that waits for a held transaction fails the test instead of hanging it.
        cursor.execute("SET lock_timeout = '5s'")
    held: list[HeldProducer] = []
    try:
        late = HeldProducer("first_use", held)
        doomed = HeldProducer("first_use_doomed", held)
        late_raw = HeldProducer("first_use_raw", held, raw=True)
        held_since = time.monotonic()

        # Each enqueue and its commit: (job id, seconds it took, epoch of its commit).
        committed: list[tuple[int, float, float]] = []

        def timed(enqueue) -> None:
            started = time.monotonic()
            job_id = enqueue()
            committed.append((job_id, time.monotonic() - started, time.time()))

        for n in range(10):
            # The held producers' lanes: the late one's, the doomed one's.
            timed(lambda n=n: awa.enqueue("tests.record", args={"n": n}, queue="first_use"))
            timed(lambda n=n: awa.enqueue("tests.record", args={"n": n}, queue="first_use_doomed"))
            time.sleep(0.02)
        for n, queue in enumerate(FRESH):
            # Lanes nobody used before: their first jobs, alone and in a batch, then more.
            timed(lambda q=queue, n=n: awa.enqueue("tests.record", args={"n": n}, queue=q))
            with transaction.atomic():
                started = time.monotonic()
                ids = awa.enqueue_many("tests.record", [{"n": n}] * 5, queue=queue, priority=3)
            committed.extend((job_id, time.monotonic() - started, time.time()) for job_id in ids)
        timed(lambda: raw_enqueue("fresh_raw", 1))
        timed(lambda: raw_enqueue("fresh_raw", 2))

        slow = [(job, took) for job, took, _ in committed if took > 1.0]
        assert slow == [], slow
        wait_until(lambda: set(runs()) >= {job for job, _, _ in committed}, timeout=10)
        ran = runs()
        pickups = sorted(ran[job][1] - at for job, _, at in committed)
        # The normal pickup time: the hole's bound (0.25 s) and a poll interval (1 s) at worst.
        assert pickups[-1] < 2.0, pickups
        assert not {late.job_id, doomed.job_id, late_raw.job_id} & set(ran)

        time.sleep(max(0.0, HOLD_S - (time.monotonic() - held_since)))
        late.end("commit")
        doomed.end("rollback")
        late_raw.end("commit")
        wait_until(lambda: {late.job_id, late_raw.job_id} <= set(runs()), timeout=10)
        time.sleep(2)  # a second claim of either, were there one, would have run by now
        ran = runs()
        everyone = [late.job_id, late_raw.job_id, *(job for job, _, _ in committed)]
        assert {job: ran[job][0] for job in everyone} == dict.fromkeys(everyone, 1)
        assert doomed.job_id not in ran
        assert awa.get_job(doomed.job_id) is None
    finally:
        for producer in held:
            producer.kill()
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")
    report = audit.run()
    assert report.held, report.as_dict()
