"""No open transaction stalls a lane (docs/architecture.md#claim, "Live holes"), with a real
worker process.

A transaction that enqueues and then runs Django's ``connection.check_constraints()`` (``SET
CONSTRAINTS ALL IMMEDIATE``, as ``loaddata`` and ``TestCase`` do) draws its lane position at
that moment and holds it for as long as it stays open. Two such transactions stay open for 30 s
on the lane every other producer uses, one to commit in the end and one to roll back; the jobs
other connections commit meanwhile run within the normal pickup time, the late commit's job runs
once (two workers claim the lane) when it finally commits, the rolled-back one never runs, and
the invariant audit holds at the end.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, connections, transaction

import awa_django as awa
from awa_django.ops import audit
from tests.conftest import wait_until

HOLD_S = 30.0
OTHERS = 50


class HeldOpen(threading.Thread):
    """Enqueues one job on its own connection, publishes it early, and keeps the transaction
    open until ``release`` (then commits, or with ``rollback`` rolls back)."""

    def __init__(self, *, rollback: bool) -> None:
        super().__init__(daemon=True)
        self.rollback = rollback
        self.ready = threading.Event()
        self.release = threading.Event()
        self.job_id = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with transaction.atomic():
                self.job_id = awa.enqueue("tests.record", args={"n": -1})
                connection.check_constraints()
                self.ready.set()
                assert self.release.wait(HOLD_S + 30)
                if self.rollback:
                    transaction.set_rollback(True)
        except BaseException as error:
            self.error = error
        finally:
            self.ready.set()
            connections.close_all()


def runs() -> dict[int, tuple[int, float]]:
    """job id -> (times it ran, epoch of its first run)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT job_id, count(*), extract(epoch FROM min(at))::float FROM tests_job_runs"
            " WHERE job_id IS NOT NULL GROUP BY 1"
        )
        return {row[0]: (row[1], row[2]) for row in cursor.fetchall()}


@pytest.mark.fault_injection
def test_transactions_held_open_after_an_early_publication_stall_no_other_job(worker_process):
    # Two workers: the late commit is claimed once whichever of them sees it first.
    for _ in range(2):
        worker_process("--queue", "default=8").wait_ready()
    warm = awa.enqueue("tests.record", args={"n": 0})
    wait_until(lambda: warm in runs(), timeout=10)

    late = HeldOpen(rollback=False)
    doomed = HeldOpen(rollback=True)
    for holder in (late, doomed):
        holder.start()
        assert holder.ready.wait(10) and holder.error is None
    held_since = time.monotonic()

    committed_at: dict[int, float] = {}
    for n in range(OTHERS):
        job_id = awa.enqueue("tests.record", args={"n": n + 1})  # autocommit: its own commit
        committed_at[job_id] = time.time()
        time.sleep(0.01)
    wait_until(lambda: set(runs()) >= set(committed_at), timeout=10)
    ran = runs()
    pickups = sorted(ran[job][1] - committed_at[job] for job in committed_at)
    # The normal pickup time: the poll interval (1 s) after the wake-up's claim found the lane
    # held, plus the hole's bound (0.25 s) at worst.
    assert pickups[-1] < 2.0, pickups
    assert late.job_id not in ran and doomed.job_id not in ran

    time.sleep(max(0.0, HOLD_S - (time.monotonic() - held_since)))
    assert late.is_alive() and doomed.is_alive()
    for holder in (late, doomed):
        holder.release.set()
        holder.join(30)
        assert not holder.is_alive() and holder.error is None
    wait_until(lambda: late.job_id in runs(), timeout=10)
    time.sleep(2)  # a second claim of either, were there one, would have run by now
    ran = runs()
    assert {job: ran[job][0] for job in [warm, late.job_id, *committed_at]} == dict.fromkeys(
        [warm, late.job_id, *committed_at], 1
    )
    assert doomed.job_id not in ran
    assert awa.get_job(doomed.job_id) is None
    report = audit.run()
    assert report.held, report.as_dict()
