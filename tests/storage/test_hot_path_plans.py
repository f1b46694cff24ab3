"""The claim and close functions keep one plan per session (planning over every ring partition
costs more than the statements themselves), and that plan stays index-driven when it was made
while the ring was nearly empty and is reused after the ring has grown. The leader's rescue
scan, run every few seconds over the same retained rings, reads only its window."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection, transaction

import awa_django as awa
from awa_django.core.completion import Completion
from awa_django.core.outcome import Outcome
from awa_django.declarations.enqueue_options import EnqueueOptions
from awa_django.producer.enqueue import enqueue_at_lane_priority
from awa_django.sql import queries
from awa_django.storage.execution import close_params
from tests.jobs import noop

CLAIM = """
SELECT job_id, run_lease, queue, priority, shard, lane_seq, ready_slot
  FROM awa.claim_ready('default', %(limit)s, 'plans-test', 0, 0, false)
"""
RING_TABLES = (
    "ready_entries",
    "lane_commits",
    "ready_tombstones",
    "claim_receipts",
    "done_entries",
)


@pytest.fixture
def plan_log() -> Iterator[list[str]]:
    """Every plan the session executes, nested statements included (auto_explain, sent to us)."""
    plans: list[str] = []
    connection.ensure_connection()
    raw = connection.connection

    def collect(diagnostic: psycopg.errors.Diagnostic) -> None:
        if diagnostic.message_primary and "Query Text:" in diagnostic.message_primary:
            plans.append(diagnostic.message_primary)

    raw.add_notice_handler(collect)
    with connection.cursor() as cursor:
        cursor.execute("LOAD 'auto_explain'")
        cursor.execute("SET auto_explain.log_min_duration = 0")
        cursor.execute("SET auto_explain.log_nested_statements = on")
        cursor.execute("SET client_min_messages = log")
    yield plans
    raw.remove_notice_handler(collect)
    with connection.cursor() as cursor:
        cursor.execute("RESET client_min_messages")
        cursor.execute("RESET auto_explain.log_min_duration")
        cursor.execute("RESET auto_explain.log_analyze")


def claim(limit: int) -> list[tuple[object, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(CLAIM, {"limit": limit})
        return cursor.fetchall()


def completion_of(row: tuple[Any, ...], outcome: Outcome, **details: Any) -> Completion:
    """The completion of a claimed row, as ``CLAIM`` returns it."""
    job_id, run_lease, queue, priority, shard, lane_seq, ready_slot = row
    return Completion(
        job_id=job_id,
        run_lease=run_lease,
        queue=queue,
        priority=priority,
        shard=shard,
        lane_seq=lane_seq,
        ready_slot=ready_slot,
        outcome=outcome,
        **details,
    )


def close(completions: list[Completion]) -> int:
    with connection.cursor() as cursor:
        cursor.execute(queries("execution")["close_attempts"], close_params(completions))
        return len(cursor.fetchall())


def close_completed(claimed: list[tuple[Any, ...]]) -> int:
    return close([completion_of(row, Outcome.COMPLETED) for row in claimed])


def rows_read(plan: str, table: str) -> int:
    """Rows the scans of ``table`` (or its partitions) read in an analyzed plan: those they
    returned and those their filter threw away (an index scan on too short a key prefix)."""
    scan = re.compile(rf"Scan.* on {table}(?:_\d+)? .*actual time=\S+ rows=(\d+) loops=(\d+)")
    removed = re.compile(r"^\s*Rows Removed by (?:Filter|Index Recheck): (\d+)")
    read = 0
    lines = plan.splitlines()
    for index, line in enumerate(lines):
        if not (match := scan.search(line)):
            continue
        rows, loops = int(match[1]), int(match[2])
        read += rows * loops
        # The scan's detail lines follow it, indented deeper, until the next node ("->").
        for detail in lines[index + 1 :]:
            if "->" in detail:
                break
            if found := removed.match(detail):
                read += int(found[1]) * loops
    return read


def seq_scanned_ring_tables(plans: list[str]) -> set[str]:
    return {
        table
        for plan in plans
        for line in plan.splitlines()
        if "Seq Scan on" in line
        for table in RING_TABLES
        if f" {table}_" in line
    }


@pytest.mark.usefixtures("awa_db")
def test_plans_made_on_a_nearly_empty_ring_stay_on_indexes_after_it_grows(
    plan_log: list[str],
) -> None:
    # The first claim and close plan their statements while the ring holds one job, with
    # statistics that say so.
    noop.enqueue(n=0)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE " + ", ".join(f"awa.{table}" for table in RING_TABLES))
    first = claim(10)
    assert len(first) == 1
    assert close_completed(first) == 1

    noop.enqueue_many([{"n": i} for i in range(1, 3001)])
    plan_log.clear()
    batch = claim(500)
    assert len(batch) == 500
    assert close_completed(batch) == 500

    # The functions' inner statements were logged, and they read the ring through its indexes.
    assert any("Index" in plan and "claim_receipts_" in plan for plan in plan_log)
    assert seq_scanned_ring_tables(plan_log) == set()


@pytest.mark.usefixtures("awa_db")
def test_a_rescue_pass_with_a_cursor_reads_its_window_not_the_retained_ring(
    plan_log: list[str],
) -> None:
    noop.enqueue_many([{"n": i} for i in range(2000)])
    claimed = claim(2000)
    assert close_completed(claimed[1:]) == 1999
    with connection.cursor() as cursor:
        # The one attempt left open heartbeats: it has a lease, fresh even for the zero
        # staleness window the scans below use.
        job_id, run_lease, queue, priority, shard, lane_seq, ready_slot = claimed[0]
        cursor.execute(
            "INSERT INTO awa.leases (job_id, run_lease, lease_slot, ready_slot, queue, priority,"
            " shard, lane_seq, claimed_by, heartbeat_at)"
            " VALUES (%s, %s, 0, %s, %s, %s, %s, %s, 'plans-test', now() + interval '1 hour')",
            [job_id, run_lease, ready_slot, queue, priority, shard, lane_seq],
        )

    def receipts_read(claimed_after: str | None) -> int:
        plan_log.clear()
        with connection.cursor() as cursor:
            cursor.execute(
                queries("execution")["find_rescuable"],
                {"staleness_s": 0.0, "limit": 10, "claimed_after": claimed_after},
            )
            assert cursor.fetchall() == []  # closed, or heartbeating
        (scan,) = [plan for plan in plan_log if "awa.done_entries" in plan]
        assert "Bitmap Index Scan on claim_receipts_0_claimed_at_idx" in scan, scan
        assert seq_scanned_ring_tables([scan]) == set(), scan
        return rows_read(scan, "claim_receipts")

    with connection.cursor() as cursor:
        cursor.execute("SET auto_explain.log_analyze = on")
    # Without a cursor (a new leader) every retained receipt is a candidate; with one, only
    # the leased attempt and those claimed since, here none.
    assert receipts_read(None) >= 2000
    assert receipts_read("now") == 1


@pytest.mark.usefixtures("awa_db")
def test_claim_and_close_probe_one_row_per_job_however_much_the_ring_retains(
    plan_log: list[str],
) -> None:
    # Plans made with a full ready ring but no receipts and no saved progress yet, as on a
    # worker's first claim and close after a bulk enqueue.
    job_ids = noop.enqueue_many([{"n": i} for i in range(20000)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE " + ", ".join(f"awa.{table}" for table in RING_TABLES))
    assert close_completed(claim(100)) == 100
    with connection.cursor() as cursor:
        # Cancelled while queued: tombstones the claims below pass.
        cursor.execute(
            "SELECT count(*) FROM unnest(%s::bigint[]) AS id WHERE awa.cancel_job(id, 'test')"
            " IS NOT NULL",
            [job_ids[100:1100]],
        )
    for _ in range(5):
        assert close_completed(claim(500)) == 500
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.attempt_state (job_id, run_lease, progress)"
            " SELECT -n, 1, '{}' FROM generate_series(1, 3000) AS n"
        )
        cursor.execute("SET auto_explain.log_analyze = on")
    plan_log.clear()
    assert close_completed(claim(500)) == 500
    # Neither reads the 2,600 earlier receipts, the 1,000 tombstones behind the lane's cursor
    # nor the 3,000 unrelated progress rows.
    (claim_plan,) = [plan for plan in plan_log if "INSERT INTO awa.claim_receipts" in plan]
    (close_plan,) = [plan for plan in plan_log if "INSERT INTO awa.done_entries" in plan]
    assert rows_read(claim_plan, "attempt_state") == 0
    assert rows_read(claim_plan, "ready_tombstones") == 0
    assert rows_read(close_plan, "claim_receipts") == 500


def probes(plan: str, table: str) -> int:
    """Times the scans of ``table`` ran in an analyzed plan (a scan never executed: none)."""
    scan = re.compile(rf"Scan.* on {table}(?:_\d+)? .*actual time=\S+ rows=\d+ loops=(\d+)")
    return sum(int(match[1]) for line in plan.splitlines() if (match := scan.search(line)))


@pytest.mark.usefixtures("awa_db")
def test_claim_and_close_probe_saved_state_per_job_only_while_some_is_saved(
    plan_log: list[str],
) -> None:
    # Saved progress and checkpoints are rare: a first attempt's claim does not look for them
    # (no attempt can have saved any), and with none saved the close looks once per statement
    # (migration 0038), not once per completed attempt.
    job_ids = noop.enqueue_many([{"n": i} for i in range(200)])
    assert close_completed(claim(10)) == 10  # plans the statements
    with connection.cursor() as cursor:
        cursor.execute("SET auto_explain.log_analyze = on")
    plan_log.clear()
    assert close_completed(claim(50)) == 50
    (claim_plan,) = [plan for plan in plan_log if "INSERT INTO awa.claim_receipts" in plan]
    (close_plan,) = [plan for plan in plan_log if "INSERT INTO awa.done_entries" in plan]
    assert probes(claim_plan, "attempt_state") == 0
    assert probes(close_plan, "attempt_state") == 1

    # A job that ran before is probed, and gets its state back; with a row saved, every
    # completion is probed again, and the job's completion forgets its state.
    (row,) = claim(1)
    assert row[0] == job_ids[60]
    snoozed = completion_of(
        row, Outcome.SNOOZED, delay_s=0, progress={"done": 3}, checkpoint={"at": 7}
    )
    assert close([snoozed]) == 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.promote_due('scheduled', 10)")
        assert cursor.fetchone() == (1,)
    plan_log.clear()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT job_id, progress ->> 'done', checkpoint ->> 'at', run_lease, queue, priority,"
            " shard, lane_seq,"
            " ready_slot FROM awa.claim_ready('default', 500, 'plans-test', 0, 0, false)"
        )
        rows = cursor.fetchall()
    assert [row[0] for row in rows] == [*job_ids[61:], job_ids[60]]
    assert [row[1:3] for row in rows if row[1:3] != (None, None)] == [("3", "7")]
    assert rows[-1][1:3] == ("3", "7")
    (claim_plan,) = [plan for plan in plan_log if "INSERT INTO awa.claim_receipts" in plan]
    assert probes(claim_plan, "attempt_state") == 1
    plan_log.clear()
    assert close_completed([(row[0], *row[3:]) for row in rows]) == len(rows)
    (close_plan,) = [plan for plan in plan_log if "INSERT INTO awa.done_entries" in plan]
    assert probes(close_plan, "attempt_state") == 1 + len(rows)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.attempt_state")
        assert cursor.fetchone() == (0,)


@pytest.mark.usefixtures("awa_db")
def test_a_close_of_completions_sets_up_no_plan_for_the_other_outcomes(
    plan_log: list[str],
) -> None:
    # Every statement a function runs is set up whole on each call, whatever it finds: the
    # backlog, DLQ and saved-state writes of the attempts that did not complete are a
    # statement of their own (migration 0038), which a batch of completions does not run.
    noop.enqueue_many([{"n": i} for i in range(20)])
    claimed = claim(10)
    plan_log.clear()
    assert close_completed(claimed) == 10
    rare = ("awa.deferred_jobs", "awa.dlq_entries", "awa.ready_entries")
    assert [plan for plan in plan_log if "INSERT INTO awa.done_entries" in plan]
    assert not [plan for plan in plan_log if any(table in plan for table in rare)]
    (row,) = claim(1)
    plan_log.clear()
    assert close([completion_of(row, Outcome.RETRYABLE, delay_s=0, error={"message": "x"})]) == 1
    assert [plan for plan in plan_log if "INSERT INTO awa.deferred_jobs" in plan]


@pytest.mark.django_db
def test_a_receipt_writes_only_the_indexes_something_reads() -> None:
    # The primary key (the lane cursor, the hole and sequential checks), job_id (the close's
    # probe, the jobs view, cancel, heartbeats, callbacks) and claimed_at (rescue's window, the
    # open attempts). deadline_at is only ever returned, never searched (migration 0038).
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes"
            " WHERE schemaname = 'awa' AND tablename = 'claim_receipts' ORDER BY indexname"
        )
        indexed = [re.sub(r".* USING (\w+ \([^)]*\)).*", r"\1", row[0]) for row in cursor]
    assert indexed == [
        "brin (claimed_at)",
        "btree (job_id)",
        "btree (queue, priority, shard, commit_seq, lane_seq, ready_slot)",
    ]


@pytest.mark.usefixtures("awa_db")
def test_a_claim_behind_many_large_commits_reads_about_its_limit(
    plan_log: list[str],
) -> None:
    # A backlog enqueued in bulk calls: every commit ahead of the lane's cursor holds more rows
    # than a claim takes. A claim reads the rows it takes, across a commit boundary too, not up
    # to its limit from each of the commits ahead.
    job_ids = [
        job_id
        for commit in range(30)
        for job_id in noop.enqueue_many([{"n": commit * 500 + i} for i in range(500)])
    ]
    assert close_completed(claim(64)) == 64  # plans the claim's statements
    with connection.cursor() as cursor:
        cursor.execute("SET auto_explain.log_analyze = on")
    claimed: list[object] = []
    read: list[int] = []
    # Eight claims of 64 from position 64 on: the seventh crosses into the second commit.
    for _ in range(8):
        plan_log.clear()
        batch = claim(64)
        assert close_completed(batch) == 64
        claimed += [row[0] for row in batch]
        (claim_plan,) = [plan for plan in plan_log if "INSERT INTO awa.claim_receipts" in plan]
        read.append(rows_read(claim_plan, "ready_entries"))
    assert claimed == job_ids[64 : 64 + 8 * 64]
    assert read == [64] * 8, read


LOCKED_RING_PARTITIONS = """
SELECT DISTINCT regexp_replace(c.relname, '_[0-9]+$', '')
  FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
 WHERE l.pid = pg_backend_pid() AND c.relkind = 'r' AND c.relname ~ '_[0-9]+$'
"""


@pytest.mark.usefixtures("awa_db")
def test_a_claim_of_an_ordinary_queue_does_not_touch_the_closures() -> None:
    # Every relation a statement's plan names is locked on every execution, whether the claim
    # reads it or not; each partition lock beyond the first few goes through the shared lock
    # table. Only sequential lanes read the closures (done_entries) when they claim.
    noop.enqueue_many([{"n": i} for i in range(3)])
    assert len(claim(1)) == 1  # plans the claim's statements in an earlier transaction
    with transaction.atomic(), connection.cursor() as cursor:
        assert len(claim(1)) == 1
        cursor.execute(LOCKED_RING_PARTITIONS)
        locked = {row[0] for row in cursor.fetchall()}
    assert locked == {"ready_entries", "lane_commits", "ready_tombstones", "claim_receipts"}


CLAIM_LOCKS_HELD = """
SELECT count(*) FROM pg_locks
 WHERE pid = pg_backend_pid() AND locktype = 'advisory' AND classid = 1096237379
"""


def enqueue_at(priority: int) -> int:
    return enqueue_at_lane_priority(
        noop,
        args={"n": priority},
        options=EnqueueOptions(queue="default", priority=priority, eager=False),
    )


@pytest.mark.usefixtures("awa_db")
def test_a_claim_of_a_few_lanes_keeps_no_lane_marks() -> None:
    # Up to 4 lanes per shard (the native priorities) the claim visits the lanes as they are:
    # it usually stops at the first, and reading or writing a lane mark would cost more than
    # the drained lanes it skips.
    for priority in (1, 2, 3, 4):
        awa.enqueue(noop, args={"n": priority}, priority=priority)
    assert len(claim(1)) == 1
    assert len(claim(10)) == 3
    assert claim(10) == []
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM awa.lane_marks")
        assert cursor.fetchone() == (0,)


@pytest.mark.usefixtures("awa_db")
def test_a_claim_in_static_order_reads_the_lanes_once(plan_log: list[str]) -> None:
    # Without aging, or with one lane, a queue's lane order is static (by priority, shards
    # rotated): the claim reads it in the statement that counts the lanes, not again through
    # awa.claim_order (migration 0038). Aged claims of several lanes still order them by head.
    awa.enqueue(noop, args={"n": 0}, priority=2)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT job_id FROM awa.claim_ready('default', 10, 'plans-test', 0, 60, false)"
        )
        assert len(cursor.fetchall()) == 1
    for priority in (4, 3, 1, 2):
        awa.enqueue(noop, args={"n": priority}, priority=priority)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT priority FROM awa.claim_ready('default', 10, 'plans-test', 0, 0, false)"
        )
        assert [row[0] for row in cursor.fetchall()] == [1, 2, 3, 4]
    assert not [plan for plan in plan_log if "awa.claim_order" in plan]
    for priority in (4, 3, 1, 2):
        awa.enqueue(noop, args={"n": priority}, priority=priority)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT priority FROM awa.claim_ready('default', 10, 'plans-test', 0, 60, false)"
        )
        assert [row[0] for row in cursor.fetchall()] == [1, 2, 3, 4]
    assert [plan for plan in plan_log if "awa.claim_order" in plan]


@pytest.mark.usefixtures("awa_db")
def test_a_claim_passes_drained_lanes_without_locking_or_reading_them() -> None:
    # A queue keeps every lane it ever used: one per django.tasks priority it saw. Each drained
    # lane is ruled out in the statement that orders the lanes, so a claim takes the lock (and
    # reads the cursor) of only the lanes that hold work.
    for priority in range(-98, 102):
        enqueue_at(priority)
    assert len(claim(500)) == 200
    busy = [enqueue_at(102) for _ in range(3)]  # the least urgent lane, visited last
    with transaction.atomic(), connection.cursor() as cursor:
        assert [row[0] for row in claim(10)] == busy
        cursor.execute(CLAIM_LOCKS_HELD)
        assert cursor.fetchone() == (1,)
        cursor.execute("SELECT count(*) FROM awa.queue_lanes WHERE queue = 'default'")
        assert cursor.fetchone() == (201,)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("call", "body"),
    [
        ("awa.lane_lock_key(l.queue, l.priority, l.shard)", "hashtext("),
        ("awa.effective_priority(l.priority, now(), 60)", "GREATEST("),
    ],
)
def test_sql_helpers_on_the_hot_path_are_inlined(call: str, body: str) -> None:
    # A SQL function the planner cannot inline (its body more volatile than its declaration,
    # for one) is parsed and planned again in every transaction that calls it.
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN VERBOSE SELECT {call} FROM awa.queue_lanes l")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert body in plan and "awa." not in plan.split("Output:")[1].splitlines()[0], plan


@pytest.mark.usefixtures("awa_db")
def test_a_marked_claim_reads_the_commits_its_mark_did_not_see_not_the_retained_ones(
    plan_log: list[str],
) -> None:
    # A queue with more than 4 lanes goes by lane marks; the ring retains every commit of it
    # until prune. A claim finds the commits its mark did not see by transaction id, so it
    # reads those, not every commit of the queue (migration 0039).
    for _ in range(40):
        with transaction.atomic():
            for priority in range(-3, 3):
                enqueue_at(priority)
    assert len(claim(1)) == 1  # the first mark
    with transaction.atomic():
        enqueue_at(5)  # a commit the mark did not see
    with connection.cursor() as cursor:
        cursor.execute("SET auto_explain.log_analyze = on")
    plan_log.clear()
    assert len(claim(1)) == 1
    (look,) = [plan for plan in plan_log if "pg_current_snapshot() AS snapshot" in plan]
    assert rows_read(look, "lane_commits") == 1, look


@pytest.mark.usefixtures("awa_db")
def test_a_claim_reads_whether_the_lanes_it_took_the_last_rows_of_drained_in_its_mark(
    plan_log: list[str],
) -> None:
    # Tasks spread over many priorities: a claim crosses lanes, taking the last rows of each
    # but the last. Whether each has rows left is read once for them all, by the statement that
    # appends the mark leaving them out, not in a statement per lane (migration 0039).
    for priority in range(-3, 3):
        enqueue_at(priority)
        enqueue_at(priority)
    assert len(claim(1)) == 1  # the first mark: every lane
    plan_log.clear()
    assert len(claim(6)) == 6  # the rest of lane -3, lanes -2 and -1, and one of lane 0
    checks = [plan for plan in plan_log if "r.lane_seq > c.lane_seq" in plan]
    assert len(checks) == 1 and "INSERT INTO awa.lane_marks" in checks[0], checks
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT ARRAY(SELECT x >> 16 FROM unnest(lanes) AS x) FROM awa.lane_marks"
            " ORDER BY mark DESC LIMIT 1"
        )
        assert cursor.fetchone()[0] == [0, 1, 2]


def nested_statements(plans: list[str]) -> list[str]:
    """The statements a claim ran inside awa.claim_ready, each by its first line."""
    texts = [plan.split("Query Text:", 1)[1].strip() for plan in plans]
    return [text.splitlines()[0] for text in texts if "awa.claim_ready(" not in text]


@pytest.mark.usefixtures("awa_db")
def test_a_claim_of_one_lane_runs_two_statements(plan_log: list[str]) -> None:
    # One that reads the queue (paused, lane mark, lanes) and one per lane that reads its
    # cursor and claims (migration 0040): five before, a drain at c=32 paying each in full.
    for n in range(3):
        awa.enqueue(noop, args={"n": n})
    plan_log.clear()
    assert len(claim(2)) == 2
    statements = nested_statements(plan_log)
    assert len(statements) == 2, statements
    plan_log.clear()
    assert len(claim(10)) == 1
    assert len(nested_statements(plan_log)) == 2
    # Drained: the statement that reads the cursor finds nothing to take and the claim stops.
    plan_log.clear()
    assert claim(10) == []
    assert len(nested_statements(plan_log)) == 2


@pytest.mark.usefixtures("awa_db")
def test_a_marked_claim_runs_a_statement_per_lane_and_its_mark(plan_log: list[str]) -> None:
    # django.tasks priorities: a claim crossing lanes runs the statement that reads the queue,
    # one per lane it visits, and the mark it appends for the lane it took the last rows of.
    for priority in range(-3, 3):
        enqueue_at(priority)
        enqueue_at(priority)
    assert len(claim(1)) == 1  # the first mark: every lane
    plan_log.clear()
    assert [row[3] for row in claim(3)] == [-3, -2, -2]
    statements = nested_statements(plan_log)
    assert len(statements) == 4, statements
    assert "INSERT INTO awa.lane_marks" in statements[-1]


@pytest.mark.usefixtures("awa_db")
def test_a_paused_queue_claims_nothing_whether_marked_or_not() -> None:
    # Whether the queue is paused is read in the statement that reads its mark and lanes.
    for priority in range(-3, 3):
        enqueue_at(priority)
    awa.enqueue(noop, args={"n": 0}, queue="email")
    assert len(claim(1)) == 1  # the first mark
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.queue_meta (queue, paused) VALUES ('default', true), ('email', true)"
        )
        assert claim(10) == []
        cursor.execute("SELECT job_id FROM awa.claim_ready('email', 10, 'plans-test', 0, 0, false)")
        assert cursor.fetchall() == []
        cursor.execute("UPDATE awa.queue_meta SET paused = false")
        cursor.execute("SELECT job_id FROM awa.claim_ready('email', 10, 'plans-test', 0, 0, false)")
        assert len(cursor.fetchall()) == 1
    assert [row[3] for row in claim(10)] == [-2, -1, 0, 1, 2]
