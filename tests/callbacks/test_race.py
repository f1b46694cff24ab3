"""Racing closers of one parked attempt: external completions (duplicated) against the leader's
callback-timeout rescue, on separate threads and connections. Exactly one closer wins each
attempt; every loser is told so and writes nothing."""

from __future__ import annotations

import json
import signal
import threading
import time

import pytest
from django.db import connection, connections
from django.test import override_settings

import awa_django as awa
from tests.callbacks.helpers import FAST, expire_callbacks, rescue, scalar, wait_for_token
from tests.conftest import BackgroundWorker, wait_until
from tests.jobs import parks

pytestmark = [pytest.mark.usefixtures("awa_db"), pytest.mark.django_db(transaction=True)]

JOBS = 40


def test_complete_and_timeout_rescue_race_to_exactly_one_closure():
    with override_settings(AWA={**FAST, "QUEUES": {"default": {"concurrency": 4}}}):
        worker = BackgroundWorker(maintenance=False).start()
        try:
            job_ids = [parks.enqueue(timeout_s=600.0) for _ in range(JOBS)]
            tokens = {job_id: wait_for_token(job_id) for job_id in job_ids}
            wait_until(
                lambda: (
                    scalar("SELECT count(*) FROM awa.leases WHERE callback_parked_at IS NOT NULL")
                    == JOBS
                )
            )
        finally:
            worker.stop()
        expire_callbacks()

        won: dict[str, list[int]] = {"a": [], "b": []}
        stale: dict[str, int] = {"a": 0, "b": 0}
        rescued: list[int] = []
        start = threading.Barrier(3)

        def completer(name: str, order: list[int]) -> None:
            try:
                start.wait()
                for job_id in order:
                    try:
                        awa.complete_external(tokens[job_id], {"by": name})
                        won[name].append(job_id)
                    except awa.StaleCallback:
                        stale[name] += 1
            finally:
                connection.close()

        def rescuer() -> None:
            start.wait()
            while True:
                result = rescue(batch_size=3)
                rescued.append(result.rescued)
                if result.found == 0:
                    return

        # Two completers deliver every callback twice, in opposite orders, while the rescuer
        # closes timed-out attempts three at a time.
        threads = [
            threading.Thread(target=completer, args=("a", job_ids)),
            threading.Thread(target=completer, args=("b", job_ids[::-1])),
            threading.Thread(target=rescuer),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not any(thread.is_alive() for thread in threads)

    completed = won["a"] + won["b"]
    assert len(completed) == len(set(completed))
    assert len(completed) + sum(rescued) == JOBS
    assert stale["a"] + stale["b"] == 2 * JOBS - len(completed)
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT job_id, count(*), min(outcome) FROM awa.done_entries GROUP BY job_id"
        )
        closures = {job_id: (count, outcome) for job_id, count, outcome in cursor.fetchall()}
    assert set(closures) == set(job_ids)
    for job_id in job_ids:
        count, outcome = closures[job_id]
        assert count == 1
        assert outcome == ("completed" if job_id in completed else "retryable")
        assert awa.get_job(job_id).state == ("completed" if job_id in completed else "retryable")


def test_complete_races_the_rescue_of_a_leader_in_another_process(worker_process):
    """A real ``awa_worker`` process parks the jobs and, as leader, rescues their callbacks as
    they time out (every 50 ms, two at a time), while this process completes the same ones."""
    overrides = {
        "QUEUES": {"default": {"concurrency": 4}},
        "RESCUE_INTERVAL_S": 0.05,
        "RESCUE_BATCH_SIZE": 2,
        "LEADER_ELECTION_INTERVAL_S": 0.1,
        "POLL_INTERVAL_S": 0.1,
        # Rescued jobs retry much later: only first attempts are in play here.
        "RETRY_BACKOFF_BASE_S": 3600,
        "RETRY_JITTER": 0,
    }
    process = worker_process(env={"AWA_OVERRIDES": json.dumps(overrides)})
    process.wait_ready()
    job_ids = [parks.enqueue(timeout_s=1.5) for _ in range(JOBS)]
    tokens = {job_id: wait_for_token(job_id) for job_id in job_ids}
    completed: list[int] = []
    stale = [0]

    def complete(order: list[int]) -> None:
        try:
            for job_id in order:
                try:
                    awa.complete_external(tokens[job_id])
                    completed.append(job_id)
                except awa.StaleCallback:
                    stale[0] += 1
        finally:
            connection.close()

    # Start at about the moment the first callbacks time out.
    first = scalar(
        "SELECT extract(epoch FROM min(callback_timeout_at) - now()) FROM awa.leases "
        "WHERE callback_id IS NOT NULL"
    )
    time.sleep(max(float(first or 0), 0))
    threads = [
        threading.Thread(target=complete, args=(job_ids,)),
        threading.Thread(target=complete, args=(job_ids[::-1],)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    wait_until(lambda: scalar("SELECT count(*) FROM awa.done_entries") == JOBS, timeout=30)
    process.proc.send_signal(signal.SIGTERM)
    assert process.wait() == 0

    assert len(completed) == len(set(completed))
    assert stale[0] == 2 * JOBS - len(completed)
    with connection.cursor() as cursor:
        cursor.execute("SELECT job_id, run_lease, outcome FROM awa.done_entries")
        closures = cursor.fetchall()
    assert sorted(j for j, _, _ in closures) == sorted(job_ids)  # one closure each
    for job_id, run_lease, outcome in closures:
        assert run_lease == 1
        assert outcome == ("completed" if job_id in completed else "retryable")
    rescued = JOBS - len(completed)
    assert process.output.count("reason=callback_timeout") == rescued
