"""A queue's concurrency changed live (#36) reaches a running ``awa_worker`` process without a
restart: raised, more jobs run at once; lowered, running jobs finish and no more than the new
value start."""

from __future__ import annotations

import signal
import time

from django.db import connection

import awa_django as awa
from tests.conftest import wait_until
from tests.jobs import sleepy


def events() -> list[tuple[int, str]]:
    """(id, note) of every sleepy start and end, in the order they were written."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, note FROM tests_job_runs WHERE note LIKE 'sleepy-%%' ORDER BY id"
        )
        return list(cursor.fetchall())


def running_counts(found: list[tuple[int, str]]) -> list[tuple[int, str, int]]:
    """Each event with the number of jobs running just before it."""
    running, out = 0, []
    for event_id, note in found:
        out.append((event_id, note, running))
        running += 1 if note == "sleepy-start" else -1
    return out


def most_at_once(found: list[tuple[int, str]]) -> int:
    return max(
        (before + 1 for _, note, before in running_counts(found) if note == "sleepy-start"),
        default=0,
    )


def test_concurrency_raised_then_lowered_while_the_worker_runs(worker_process):
    worker = worker_process("--queue", "default=1").wait_ready()
    ids = sleepy.enqueue_many([{"seconds": 1.0} for _ in range(12)])
    wait_until(lambda: any(note == "sleepy-start" for _, note in events()))
    time.sleep(1.5)
    assert most_at_once(events()) == 1

    awa.queues.set_concurrency("default", 4)
    # No restart: the worker picks the change up and runs four at once.
    try:
        wait_until(lambda: most_at_once(events()) == 4, timeout=15)
    except AssertionError as failed:
        # What the worker saw of the change, for a failure on a loaded machine.
        raise AssertionError(f"{failed}; the worker said:\n{worker.output[-4000:]}") from None
    assert "queue concurrency changed queue=default concurrency=4 source=operator" in (
        worker.output
    )

    awa.queues.set_concurrency("default", 1)
    wait_until(lambda: "concurrency=1 source=operator" in worker.output, timeout=10)
    # Jobs claimed before the change write their start note within milliseconds of the claim.
    time.sleep(0.3)
    mark = max(event_id for event_id, _ in events())
    wait_until(lambda: {j.state for j in awa.get_jobs(ids)} == {"completed"}, timeout=60)
    after = [
        (event_id, before)
        for event_id, note, before in running_counts(events())
        if note == "sleepy-start" and event_id > mark
    ]
    # The running jobs finished; every job started since ran alone.
    assert after, "some jobs should have started after the change"
    assert all(before == 0 for _, before in after), after

    awa.queues.reset_concurrency("default")
    wait_until(lambda: "concurrency=1 source=configured" in worker.output, timeout=10)
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.wait() == 0
