"""Many producers on few lanes, with real worker processes (docs/architecture.md#enqueue).

16 producer threads write transactions that enqueue to 3 queues in random order (some jobs with
an ordering key), do more work, and commit or roll back (20%); four of them enqueue outside a
transaction instead (autocommit: each job published by its own statement, #32), on the same
lanes; two ``awa_worker`` processes run the jobs. Every committed job runs exactly once, no
rolled-back job runs, and each lane is claimed in commit order: a job whose transaction
committed before another's began comes first. The workers poll only every 30 s, so a job left
waiting for a wake-up that never came, or behind a rolled-back producer, would not finish in
time.
"""

from __future__ import annotations

import json
import random
import signal
import threading
import time
from collections import defaultdict
from typing import Any

from django.db import connection, connections, transaction
from django.test import override_settings

import awa_django as awa
from awa_django.conf import get_settings
from awa_django.ops import audit
from tests.conftest import wait_until

QUEUES = ("default", "email", "reports")
PRODUCERS = 16
TRANSACTIONS = 40
POLL_INTERVAL_S = 30.0


class Rollback(Exception):
    pass


def queue_settings() -> dict[str, Any]:
    return {name: {"concurrency": 4} for name in QUEUES}


def produce(seed: int, started: threading.Barrier, log: list[dict[str, Any]]) -> None:
    """One producer thread: transactions on its own connection, recorded with their times."""
    rng = random.Random(seed)
    try:
        started.wait(30)
        for i in range(TRANSACTIONS):
            begun = time.monotonic()
            ids: list[int] = []
            if seed % 4 == 0:
                key = f"p{seed}" if rng.random() < 0.5 else None
                ids.append(
                    awa.enqueue(
                        "tests.record",
                        args={"n": seed * 1000 + i},
                        queue=rng.choice(QUEUES),
                        ordering_key=key,
                    )
                )
                log.append(
                    {"ids": ids, "committed": True, "begun": begun, "done": time.monotonic()}
                )
                continue
            try:
                with transaction.atomic():
                    with connection.cursor() as cursor:
                        cursor.execute("INSERT INTO tests_job_runs (note) VALUES ('order')")
                    for queue in rng.sample(QUEUES, rng.randint(1, 3)):
                        key = f"p{seed}" if rng.random() < 0.5 else None
                        ids.append(
                            awa.enqueue(
                                "tests.record",
                                args={"n": seed * 1000 + i},
                                queue=queue,
                                ordering_key=key,
                            )
                        )
                    with connection.cursor() as cursor:
                        cursor.execute("SELECT pg_sleep(%s)", [rng.choice((0, 0.001, 0.003))])
                    if rng.random() < 0.2:
                        raise Rollback
            except Rollback:
                log.append({"ids": ids, "committed": False})
            else:
                log.append(
                    {"ids": ids, "committed": True, "begun": begun, "done": time.monotonic()}
                )
    finally:
        connections.close_all()


def lane_positions() -> dict[int, tuple[str, int, int, int, int]]:
    """job id -> (queue, priority, shard, commit_seq, lane_seq) of its claim."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT job_id, queue, priority, shard, commit_seq, lane_seq FROM awa.claim_receipts"
        )
        return {row[0]: tuple(row[1:]) for row in cursor.fetchall()}


def runs() -> dict[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT job_id, count(*) FROM tests_job_runs WHERE job_id IS NOT NULL GROUP BY 1"
        )
        return dict(cursor.fetchall())


def test_sixteen_producers_three_queues_rollbacks_two_workers(worker_process):
    overrides = {"QUEUES": queue_settings(), "POLL_INTERVAL_S": POLL_INTERVAL_S}
    env = {"AWA_OVERRIDES": json.dumps(overrides)}
    with override_settings(AWA={**get_settings_dict(), **overrides}):
        workers = [worker_process(env=env).wait_ready() for _ in range(2)]
        log: list[dict[str, Any]] = []
        started = threading.Barrier(PRODUCERS)
        threads = [
            threading.Thread(target=produce, args=(seed, started, log)) for seed in range(PRODUCERS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(180)
        produced_at = time.monotonic()
        committed = [j for entry in log if entry["committed"] for j in entry["ids"]]
        rolled_back = [j for entry in log if not entry["committed"] for j in entry["ids"]]
        assert len(log) == PRODUCERS * TRANSACTIONS
        assert committed and rolled_back

        # Far sooner than the 30 s poll: every job was claimed through its wake-up (or a
        # dispatcher's own follow-up claims), none waits behind a producer that rolled back.
        wait_until(lambda: set(runs()) >= set(committed), timeout=20)
        assert time.monotonic() - produced_at < 20
        for worker in workers:
            worker.proc.send_signal(signal.SIGTERM)
        assert [worker.wait() for worker in workers] == [0, 0]

    ran = runs()
    assert {job: ran.get(job, 0) for job in committed} == dict.fromkeys(committed, 1)
    assert not set(ran) & set(rolled_back)
    assert awa.get_jobs(rolled_back) == []

    # Commit order: within each lane, a transaction that committed before another began has
    # the earlier lane position.
    positions = lane_positions()
    by_lane: dict[tuple[Any, ...], list[tuple[float, float, tuple[int, int]]]] = defaultdict(list)
    for entry in log:
        if entry["committed"]:
            for job in entry["ids"]:
                queue, priority, shard, commit_seq, lane_seq = positions[job]
                by_lane[(queue, priority, shard)].append(
                    (entry["begun"], entry["done"], (commit_seq, lane_seq))
                )
    out_of_order = []
    for lane, jobs in by_lane.items():
        jobs.sort(key=lambda job: job[2])  # lane order
        # Walking back from the end of the lane: the earliest commit among the jobs after this
        # one must not come before this job's transaction began.
        earliest_later_done = float("inf")
        for begun, done, position in reversed(jobs):
            if earliest_later_done < begun:
                out_of_order.append((lane, position))
            earliest_later_done = min(earliest_later_done, done)
    assert out_of_order == []
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(DISTINCT claimed_by) FROM awa.claim_receipts")
        assert cursor.fetchone() == (2,)
    report = audit.run()
    assert report.held, report.as_dict()


def get_settings_dict() -> dict[str, Any]:
    from django.conf import settings

    assert get_settings() is not None
    return dict(settings.AWA)
