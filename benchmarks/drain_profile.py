"""What one drained job costs in counts that do not depend on the machine's load (#32).

Usage (a throwaway cluster with ``pg_stat_statements``)::

    WITH_POSTGRES_OPTIONS='-c shared_preload_libraries=pg_stat_statements \
      -c pg_stat_statements.track=top' \
    python3 scripts/with_postgres.py -- .venv/bin/python -m benchmarks.drain_profile \
        [--jobs 20000] [--mode async|sync] [--tasks [--spread]] [--concurrency 32] [--top 25] \
        [--dump PATH] [--statements] [--migrate-to MIGRATION]

Enqueues ``--jobs`` no-op jobs (``--tasks``: the side-by-side benchmark's ``django.tasks``
``@task`` probes of ``benchmarks.tasks``, enqueued through Django's API as its ``tasks``
workload does, one lane; ``--spread``: over every Django priority in turn, 201 lanes, in one
transaction, as its ``task-*-spread`` modes do), then drains them with ``awa_worker --burst``
in this process under cProfile, and prints per job: Python function calls in all and by
function (the ``--top`` most called), the garbage collector's collections by generation and the
objects its full collections traverse, and the server's statements, WAL bytes and shared
buffers touched, with the claim and close statements' calls and rows (their ratio is the batch
size they achieved), and the claims the dispatcher made: how many, jobs a claim, and how many
compared lanes by aged priority.
``--statements`` adds every statement's calls, execution and planning microseconds, plans a
call, rows a call, buffers hit and dirtied and WAL bytes and records per job (run the server
with ``-c pg_stat_statements.track=all -c pg_stat_statements.track_planning=on`` to see the
statements inside the claim and close functions, and their plans); ``--migrate-to`` runs
another version of the functions on the same server (``--migrate-to 0036``, then without it).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import threading
import time
from typing import Any

import psycopg

SERVER = """
SELECT (SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s
         WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND s.toplevel AND s.query NOT LIKE '%%pg_stat%%'),
       (SELECT coalesce(sum(shared_blks_hit + shared_blks_read), 0) FROM pg_stat_statements
         WHERE toplevel AND query NOT LIKE '%%pg_stat%%'),
       (SELECT wal_bytes FROM pg_stat_wal),
       (SELECT wal_records FROM pg_stat_wal),
       (SELECT coalesce(sum(autovacuum_count), 0) FROM pg_stat_all_tables),
       (SELECT coalesce(sum(autoanalyze_count), 0) FROM pg_stat_all_tables),
       (SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter)
"""
# Every statement, nested ones included under pg_stat_statements.track = all: what each costs
# per drained job. Times need track_planning = on for the plan column.
PER_STATEMENT = """
SELECT query, toplevel, calls, rows, plans, total_exec_time, total_plan_time,
       shared_blks_hit, shared_blks_dirtied, wal_bytes, wal_records
  FROM pg_stat_statements
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND query NOT LIKE '%%pg_stat%%'
 ORDER BY total_exec_time DESC
"""
MAINTAINED = """
SELECT schemaname || '.' || relname, autovacuum_count + autoanalyze_count
  FROM pg_stat_all_tables WHERE autovacuum_count + autoanalyze_count > 0
"""
BATCHES = """
SELECT query, calls, rows FROM pg_stat_statements
 WHERE toplevel AND (query ILIKE '%%claim%%' OR query ILIKE '%%close%%')
"""


def _server(conn: psycopg.Connection[Any]) -> tuple[float, ...]:
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(SERVER).fetchone()
    assert row
    return tuple(float(value) for value in row)


def _per_statement(conn: psycopg.Connection[Any], jobs: int, top: int) -> None:
    """Prints the ``top`` statements by execution time, each per drained job."""
    print(
        "per statement, per job (nested ones under track = all are inside their caller's"
        " times; exec and plan microseconds depend on the machine's load):"
    )
    print(
        "   calls  exec us  plan us plans/call rows/call   hit  dirtied wal B  wal rec  statement"
    )
    rows = conn.execute(PER_STATEMENT).fetchall()
    nested = sum(row[2] for row in rows if not row[1])
    print(f"  statements inside functions per job: {nested / jobs:.3f}")
    for query, toplevel, calls, nrows, plans, exec_ms, plan_ms, hit, dirtied, wal, records in rows[
        :top
    ]:
        first = ("" if toplevel else "  > ") + " ".join(query.split())[:60]
        print(
            f"  {calls / jobs:6.3f} {exec_ms * 1000 / jobs:8.2f} {plan_ms * 1000 / jobs:8.2f}"
            f" {plans / max(calls, 1):10.2f} {nrows / max(calls, 1):9.1f}"
            f" {hit / jobs:5.1f} {dirtied / jobs:8.3f} {float(wal) / jobs:5.0f}"
            f" {records / jobs:8.2f}  {first}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--mode", choices=("async", "sync"), default="async")
    parser.add_argument(
        "--tasks",
        action="store_true",
        help="drain django.tasks @task probes through AwaBackend instead of native no-op jobs",
    )
    parser.add_argument(
        "--spread",
        action="store_true",
        help="with --tasks: the tasks spread over every Django priority in turn (201 lanes), "
        "as the side-by-side benchmark's task-*-spread modes enqueue them",
    )
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument(
        "--no-cprofile",
        action="store_true",
        help="drain without the profiler (claim sizes and server counts at full speed)",
    )
    parser.add_argument(
        "--checkpoint",
        action="store_true",
        help="CHECKPOINT just before the drain: its WAL then carries the full-page images a "
        "drain writes when a checkpoint falls in it",
    )
    parser.add_argument(
        "--statements",
        action="store_true",
        help="print each statement's calls, exec and plan microseconds, buffers and WAL per job "
        "(pg_stat_statements.track = all and track_planning = on for nested statements and plans)",
    )
    parser.add_argument(
        "--migrate-to",
        metavar="MIGRATION",
        help="drain with the functions of this earlier migration (e.g. 0036), and migrate to "
        "the latest again after the drain: one server runs two versions in turn",
    )
    parser.add_argument("--dump", help="also write the profile here (pstats format)")
    args = parser.parse_args()
    if args.spread and not args.tasks:
        parser.error("--spread spreads django.tasks tasks: it needs --tasks")
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    import awa_django as awa
    from awa_django.testing import reset_queue
    from benchmarks.jobs import ASYNC_KIND, SYNC_KIND
    from benchmarks.tasks import enqueue_tasks

    call_command("migrate", verbosity=0)
    if args.migrate_to:
        # The older functions, recorded as the latest (the worker refuses pending migrations);
        # put back at the end, so the next run without the option drains the latest ones.
        call_command("migrate", "awa_django", args.migrate_to, verbosity=0)
        call_command("migrate", "awa_django", fake=True, verbosity=0)
    reset_queue()
    kind = ASYNC_KIND if args.mode == "async" else SYNC_KIND
    payload = "0" * 240
    # The spread tasks in one transaction, as the side-by-side run enqueues them: one commit
    # per lane, where a thousand jobs at a time would give each of the 201 lanes a commit each.
    chunk = args.jobs if args.spread else 1_000
    for start in range(0, args.jobs, chunk):
        batch = [{"n": n, "payload": payload} for n in range(start, min(start + chunk, args.jobs))]
        if args.tasks:
            enqueue_tasks(batch, f"task-{args.mode}" + ("-spread" if args.spread else ""))
        else:
            awa.enqueue_many(kind, batch)
    connections.close_all()

    stats = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
    stats.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    stats.execute("SELECT pg_stat_statements_reset()")
    if args.checkpoint:
        stats.execute("CHECKPOINT")
    # Statistics reach the shared counters when a backend goes idle or exits.
    time.sleep(1.2)
    before = _server(stats)
    maintained = dict(stats.execute(MAINTAINED).fetchall())
    full_scans: list[int] = []

    def on_collect(phase: str, info: dict[str, int]) -> None:
        # The objects a full collection traverses: every tracked object outside the frozen
        # generation.
        if phase == "start" and info["generation"] == 2:
            full_scans.append(len(gc.get_objects()))

    from awa_django.worker.dispatcher import Dispatcher

    sizes: list[tuple[int, int]] = []
    claim = Dispatcher._claim

    async def counted_claim(self: Dispatcher, limit: int) -> Any:
        jobs = await claim(self, limit)
        sizes.append((limit, len(jobs)))
        return jobs

    aged_claims: list[bool] = []
    claim_aged = Dispatcher._claim_aged

    def counted_claim_aged(self: Dispatcher) -> bool:
        aged = claim_aged(self)
        aged_claims.append(aged)
        return aged

    Dispatcher._claim = counted_claim  # type: ignore[method-assign]
    Dispatcher._claim_aged = counted_claim_aged  # type: ignore[method-assign]
    gc.callbacks.append(on_collect)
    gc_before = [entry["collections"] for entry in gc.get_stats()]
    profile = cProfile.Profile()
    # The threads the drain starts (sync handlers', asgiref's) each get a profile of their own,
    # started by the first event of the thread: a sync job's calls in its handler thread
    # (Django's connection checks around it, the hand-off back) count too.
    thread_profiles: list[cProfile.Profile] = []

    def profile_thread(frame: Any, event: str, arg: Any) -> None:
        thread_profile = cProfile.Profile()
        thread_profiles.append(thread_profile)
        thread_profile.enable()

    if not args.no_cprofile:
        threading.setprofile(profile_thread)
        profile.enable()
    call_command("awa_worker", "--burst", "--queue", f"bench={args.concurrency}", verbosity=0)
    profile.disable()
    threading.setprofile(None)  # type: ignore[arg-type]
    gc.callbacks.remove(on_collect)
    collections = [e["collections"] - b for e, b in zip(gc.get_stats(), gc_before, strict=True)]

    connections.close_all()
    time.sleep(1.2)
    after = _server(stats)
    maintained_in_drain = sorted(
        name
        for name, runs in stats.execute(MAINTAINED).fetchall()
        if runs > maintained.get(name, 0)
    )

    jobs = args.jobs
    entries: dict[Any, Any] = {}
    loop_total = 0
    if not args.no_cprofile:
        # Counted before the threads' are added in: Stats merges them into this very dict.
        loop_total = sum(entry[1] for entry in pstats.Stats(profile).stats.values())  # type: ignore[attr-defined]
        merged = pstats.Stats(profile, *thread_profiles)
        if args.dump:
            merged.dump_stats(args.dump)
        entries = merged.stats  # type: ignore[attr-defined]
    total = sum(entry[1] for entry in entries.values())
    what = (
        "django.tasks @task" + (" spread over 201 priorities" if args.spread else "")
        if args.tasks
        else "native"
    )
    print(f"{what} {args.mode} c={args.concurrency}, {jobs} jobs")
    print(f"python function calls per job, event loop's thread: {loop_total / jobs:.1f}")
    print(f"python function calls per job, all threads: {total / jobs:.1f} (by function:)")
    ranked = sorted(entries.items(), key=lambda item: -item[1][1])[: args.top]
    for (path, line, name), entry in ranked:
        where = f"{os.path.basename(path)}:{line}({name})"
        print(f"  {entry[1] / jobs:8.2f}  {where}")
    asked = sorted(limit for limit, _ in sizes)
    print(
        f"claims: {len(sizes)}, asked for min {asked[0]} median {asked[len(asked) // 2]}"
        f" max {asked[-1]}, {sum(1 for _, got in sizes if got < 10)} got fewer than 10 jobs"
    )
    claimed = sum(got for _, got in sizes)
    print(
        f"jobs a claim: {claimed / len(sizes):.1f}, claims per job: {len(sizes) / jobs:.4f},"
        f" aged claims: {sum(aged_claims)} of {len(aged_claims)}"
    )
    print(f"garbage collections by generation: {collections}")
    print(f"objects traversed by full collections per job: {sum(full_scans) / jobs:.1f}")
    statements, buffers, wal, records, vacuums, analyzes, checkpoints = (
        a - b for a, b in zip(after, before, strict=True)
    )
    print(f"statements per job: {statements / jobs:.3f}")
    print(f"shared buffers per job: {buffers / jobs:.1f}")
    print(f"WAL bytes per job: {wal / jobs:.0f}, records per job: {records / jobs:.2f}")
    # Work the server did beside the drain's statements, which falls in some drains and not
    # in others: autovacuum and autoanalyze runs (of any table of the database, the catalog's
    # included), checkpoints.
    print(
        f"during the drain: autovacuums {vacuums:.0f}, autoanalyzes {analyzes:.0f},"
        f" checkpoints {checkpoints:.0f}"
        + (
            f" (autovacuumed or analyzed: {', '.join(maintained_in_drain)})"
            if maintained_in_drain
            else ""
        )
    )
    for query, calls, rows in stats.execute(BATCHES).fetchall():
        first = " ".join(query.split())[:70]
        print(f"  {calls:7d} calls, {rows / max(calls, 1):6.1f} rows a call: {first}")
    if args.statements:
        _per_statement(stats, jobs, args.top)
    if args.migrate_to:
        call_command("migrate", "awa_django", args.migrate_to, fake=True, verbosity=0)
        call_command("migrate", "awa_django", verbosity=0)


if __name__ == "__main__":
    main()
