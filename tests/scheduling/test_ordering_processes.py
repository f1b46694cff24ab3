"""Ordering keys across real worker processes: with 4 shards and 4 workers, jobs that share a key
run one after another in enqueue order while different keys run in parallel."""

from __future__ import annotations

import json
from collections import defaultdict

from django.db import connection

import awa_django as awa
from awa_django.ops.shards import set_enqueue_shards
from tests.conftest import wait_until

KEYS = 8
PER_KEY = 12


def events() -> list[tuple[str, str, int]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT note FROM tests_job_runs ORDER BY at, id")
        return [(kind, key, int(seq)) for kind, key, seq in (r[0].split() for r in cursor)]


def test_jobs_sharing_an_ordering_key_complete_in_enqueue_order(worker_process):
    set_enqueue_shards("default", 4)
    for seq in range(PER_KEY):
        for key in range(KEYS):
            awa.enqueue("tests.keyed", args={"key": f"k{key}", "seq": seq}, ordering_key=f"k{key}")
    # One job at a time per process, so that the four lanes need several processes: at a
    # concurrency of 4, one process can hold a job of every lane, and the candidate alone
    # answers a wake-up (#37), so on a loaded machine one process ran the whole backlog.
    overrides = {"QUEUES": {"default": {"concurrency": 1, "sequential_lanes": True}, "email": {}}}
    env = {"AWA_OVERRIDES": json.dumps(overrides)}
    workers = [worker_process("--queue", "default", env=env) for _ in range(4)]
    for worker in workers:
        worker.wait_ready()
    wait_until(lambda: len(events()) == 2 * KEYS * PER_KEY, timeout=90)

    by_key: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for kind, key, seq in events():
        by_key[key].append((kind, seq))
    expected = [(kind, seq) for seq in range(PER_KEY) for kind in ("start", "end")]
    # Every key: start 0, end 0, start 1, end 1, ... (the next job starts after the previous
    # one finished, whichever worker ran it).
    assert {key: runs for key, runs in by_key.items() if runs != expected} == {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(DISTINCT claimed_by), count(DISTINCT shard) FROM awa.claim_receipts"
        )
        processes, shards = cursor.fetchone()
    assert processes >= 2 and shards >= 2
