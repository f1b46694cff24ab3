"""What one job costs, operation by operation: awa_django, pgqueuer and the bare minimum (#32).

Usage (a durable throwaway cluster with ``pg_stat_statements``; about five minutes)::

    WITH_POSTGRES_OPTIONS='-c fsync=on -c synchronous_commit=on -c full_page_writes=on \
      -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=top' \
    python3 scripts/with_postgres.py -- .venv/bin/python -m benchmarks.cost_budget \
        [--jobs 4000] [--reps 5] [--output PATH]

Each operation runs ``--jobs`` times per repetition, repetitions interleaved (every operation
once, then every operation again), and is reported per job, median and range over the
repetitions:

- **client CPU µs**: this process's CPU time (user + system) over the operation;
- **server CPU µs**: every PostgreSQL process's CPU time, the background writers and the
  backends that exited meanwhile included (the postmaster's reaped children);
- **statements**: top-level statements the server ran (``pg_stat_statements`` calls: what the
  client sent, ``BEGIN`` and ``COMMIT`` included, and the statements of triggers that fire at
  commit, which run at top level);
- **rows written** and **index entries written**: inserted, updated and deleted rows over every
  table, and for each table its inserts and non-HOT updates times its number of indexes;
- **WAL bytes** (``pg_stat_wal``).

The operations: the single enqueue in autocommit (awa ``awa.enqueue``; pgqueuer
``Queries.enqueue`` on asyncpg; bare: a prepared ``INSERT`` of the same row into a plain table)
and inside a transaction (awa, in ``transaction.atomic()``); the bulk enqueue of 1,000 (awa
``enqueue_many``; pgqueuer's list enqueue; bare ``COPY``); and the drain, claim and completion
together (awa: ``awa_worker --burst --queue bench=32`` in this process, with one lane and with
the jobs spread over 201 lanes; pgqueuer: ``QueueManager`` with batch 16 and 32 tasks; bare: a
loop claiming 32 rows with ``FOR UPDATE SKIP LOCKED`` and deleting them). The drain's server time
is split into claim and completion by ``pg_stat_statements``' execution time.

Writes every sample to ``benchmarks/results/cost-budget-<UTC>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.environment import collect

RESULTS_DIR = Path(__file__).resolve().parent / "results"
ARGS = {"n": 0, "payload": "0" * 240}
BULK = 1_000
BARE_TABLE = """
CREATE TABLE IF NOT EXISTS bare_jobs (
    id bigserial PRIMARY KEY, queue text NOT NULL, kind text NOT NULL, args jsonb NOT NULL,
    priority smallint NOT NULL DEFAULT 2, run_at timestamptz NOT NULL DEFAULT now(),
    state text NOT NULL DEFAULT 'ready')
"""
BARE_INDEX = (
    "CREATE INDEX IF NOT EXISTS bare_jobs_ready ON bare_jobs (queue, priority, id) "
    "WHERE state = 'ready'"
)
BARE_INSERT = "INSERT INTO bare_jobs (queue, kind, args) VALUES (%s, %s, %s) RETURNING id"
BARE_CLAIM = """
UPDATE bare_jobs b SET state = 'running' FROM (
    SELECT id FROM bare_jobs WHERE queue = 'bench' AND state = 'ready'
     ORDER BY priority, id FOR UPDATE SKIP LOCKED LIMIT 32) c
 WHERE b.id = c.id RETURNING b.id, b.args
"""
BARE_DONE = "DELETE FROM bare_jobs WHERE id = ANY(%s)"


def _server_ticks() -> int:
    """CPU clock ticks of every PostgreSQL process, and of the ones that exited (reaped by the
    postmaster, which adds them to its children's time)."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        if name != "postgres":
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        # utime, stime, cutime, cstime: fields 14-17 of proc(5), here from the state on.
        total += sum(int(value) for value in fields[11:15])
    return total


class Counters:
    """The server's cumulative counters this benchmark reads, on its own connection."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)

    def read(self) -> dict[str, float]:
        self.conn.execute("SELECT pg_stat_clear_snapshot()")
        calls = self.conn.execute(
            "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements "
            "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND query NOT LIKE '%%pg_stat%%'"
        ).fetchone()
        rows = self.conn.execute(
            """
            SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0),
                   coalesce(sum((n_tup_ins + n_tup_upd - n_tup_hot_upd)
                                * (SELECT count(*) FROM pg_index i WHERE i.indrelid = t.relid)), 0)
              FROM pg_stat_user_tables t
            """
        ).fetchone()
        wal = self.conn.execute("SELECT wal_bytes FROM pg_stat_wal").fetchone()
        split = self.conn.execute(
            """
            SELECT coalesce(sum(total_exec_time) FILTER (WHERE query ILIKE '%%claim%%'), 0),
                   coalesce(sum(total_exec_time) FILTER (WHERE query ILIKE '%%close%%'
                                                          OR query ILIKE '%%log_jobs%%'
                                                          OR query ILIKE '%%DELETE FROM bare%%'),
                            0)
              FROM pg_stat_statements
            """
        ).fetchone()
        assert calls and rows and wal and split
        return {
            "calls": float(calls[0]),
            "rows": float(rows[0]),
            "index_entries": float(rows[1]),
            "wal_bytes": float(wal[0]),
            "claim_ms": float(split[0]),
            "complete_ms": float(split[1]),
        }


def _settle() -> None:
    # Statistics reach the shared counters when a backend goes idle (at most once a second) or
    # exits; the operations close their connections, and this waits out the rest.
    time.sleep(1.2)


def measure(counters: Counters, jobs: int, run: Callable[[], None]) -> dict[str, float]:
    """Run one operation and return its costs per job."""
    _settle()
    before = counters.read()
    ticks = _server_ticks()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    run()
    elapsed = time.perf_counter() - started
    after_usage = resource.getrusage(resource.RUSAGE_SELF)
    server_s = (_server_ticks() - ticks) / os.sysconf("SC_CLK_TCK")
    _settle()
    after = counters.read()
    client_s = (after_usage.ru_utime + after_usage.ru_stime) - (usage.ru_utime + usage.ru_stime)
    # The counters' own statements read pg_stat_* views, which the count leaves out.
    calls = after["calls"] - before["calls"]
    return {
        "jobs_per_s": jobs / elapsed,
        "client_cpu_us": client_s / jobs * 1e6,
        "server_cpu_us": server_s / jobs * 1e6,
        "statements": calls / jobs,
        "rows_written": (after["rows"] - before["rows"]) / jobs,
        "index_entries": (after["index_entries"] - before["index_entries"]) / jobs,
        "wal_bytes": (after["wal_bytes"] - before["wal_bytes"]) / jobs,
        "claim_server_us": (after["claim_ms"] - before["claim_ms"]) / jobs * 1e3,
        "complete_server_us": (after["complete_ms"] - before["complete_ms"]) / jobs * 1e3,
    }


class Awa:
    def __init__(self, url: str) -> None:
        os.environ["DATABASE_URL"] = url
        os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)

    def reset(self) -> None:
        from django.db import connections

        from awa_django.testing import reset_queue

        reset_queue()
        connections.close_all()

    def enqueue_autocommit(self, jobs: int) -> None:
        from django.db import connections

        import awa_django as awa
        from benchmarks.sidebyside.systems.awa_django import _kind

        kind = _kind("async")
        for n in range(jobs):
            awa.enqueue(kind, args={**ARGS, "n": n})
        connections.close_all()

    def enqueue_in_transaction(self, jobs: int) -> None:
        from django.db import connections, transaction

        import awa_django as awa
        from benchmarks.sidebyside.systems.awa_django import _kind

        kind = _kind("async")
        for n in range(jobs):
            with transaction.atomic():
                awa.enqueue(kind, args={**ARGS, "n": n})
        connections.close_all()

    def enqueue_bulk(self, jobs: int) -> None:
        from django.db import connections

        import awa_django as awa
        from benchmarks.sidebyside.systems.awa_django import _kind

        kind = _kind("async")
        for start in range(0, jobs, BULK):
            batch = range(start, min(start + BULK, jobs))
            awa.enqueue_many(kind, [{**ARGS, "n": n} for n in batch])
        connections.close_all()

    def preload(self, jobs: int, lanes: int) -> None:
        from django.db import connection, connections

        import awa_django as awa
        from awa_django.declarations.enqueue_options import NO_OPTIONS
        from awa_django.producer.enqueue import enqueue_at_lane_priority
        from benchmarks.sidebyside.systems.awa_django import _kind

        kind = _kind("async")
        if lanes == 1:
            awa.enqueue_many(kind, [{**ARGS, "n": n} for n in range(jobs)])
        else:
            from django.db import transaction

            with transaction.atomic():
                for n in range(jobs):
                    options = NO_OPTIONS.using(priority=-98 + n % lanes)
                    enqueue_at_lane_priority(kind, args={**ARGS, "n": n}, options=options)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        connections.close_all()

    def drain(self) -> None:
        from django.core.management import call_command

        call_command("awa_worker", "--burst", "--queue", "bench=32", verbosity=0)


class PgQueuer:
    ENTRYPOINT = "bench_noop"

    def __init__(self, url: str) -> None:
        from benchmarks.sidebyside.systems.pgqueuer import PgQueuer as System

        self.url = url
        System().install(url)

    def _queries(self, conn: Any) -> Any:
        from pgqueuer.db import AsyncpgDriver
        from pgqueuer.queries import Queries

        return Queries(AsyncpgDriver(conn))

    def reset(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("TRUNCATE pgqueuer, pgqueuer_log")

    def _with_queries(self, body: Callable[[Any], Any]) -> None:
        import asyncpg

        async def run() -> None:
            conn = await asyncpg.connect(self.url)
            try:
                await body(self._queries(conn))
            finally:
                await conn.close()

        asyncio.run(run())

    def enqueue_autocommit(self, jobs: int) -> None:
        async def body(queries: Any) -> None:
            for n in range(jobs):
                await queries.enqueue(self.ENTRYPOINT, json.dumps({**ARGS, "n": n}).encode())

        self._with_queries(body)

    def enqueue_bulk(self, jobs: int) -> None:
        async def body(queries: Any) -> None:
            for start in range(0, jobs, BULK):
                payloads = [
                    json.dumps({**ARGS, "n": n}).encode()
                    for n in range(start, min(start + BULK, jobs))
                ]
                count = len(payloads)
                await queries.enqueue([self.ENTRYPOINT] * count, payloads, [0] * count)

        self._with_queries(body)

    def preload(self, jobs: int, lanes: int) -> None:
        self.enqueue_bulk(jobs)

    def drain(self, jobs: int) -> None:
        import asyncpg
        from pgqueuer.models import Job
        from pgqueuer.qm import QueueManager

        async def run() -> None:
            conn = await asyncpg.connect(self.url)
            manager = QueueManager(self._queries(conn))
            done = 0

            @manager.entrypoint(self.ENTRYPOINT)
            async def noop(job: Job) -> None:
                nonlocal done
                done += 1
                if done >= jobs:
                    manager.shutdown.set()

            await manager.run(batch_size=16, max_concurrent_tasks=32)
            await conn.close()

        asyncio.run(run())


class Bare:
    """The least a queue could do: one plain table, prepared statements, no notification."""

    def __init__(self, url: str) -> None:
        self.url = url
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(BARE_TABLE)
            conn.execute(BARE_INDEX)

    def reset(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("TRUNCATE bare_jobs")

    def enqueue_autocommit(self, jobs: int) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            for n in range(jobs):
                conn.execute(
                    BARE_INSERT, ("bench", "bench.noop", json.dumps({**ARGS, "n": n})), prepare=True
                ).fetchone()

    def enqueue_bulk(self, jobs: int) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            for start in range(0, jobs, BULK):
                with conn.cursor().copy("COPY bare_jobs (queue, kind, args) FROM STDIN") as copy:
                    for n in range(start, min(start + BULK, jobs)):
                        copy.write_row(("bench", "bench.noop", json.dumps({**ARGS, "n": n})))

    def preload(self, jobs: int, lanes: int) -> None:
        self.enqueue_bulk(jobs)
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("ANALYZE bare_jobs")

    def drain(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while True:
                claimed = conn.execute(BARE_CLAIM, prepare=True).fetchall()
                if not claimed:
                    return
                conn.execute(BARE_DONE, ([row[0] for row in claimed],), prepare=True)


def operations(systems: dict[str, Any], jobs: int) -> dict[str, tuple[Callable[[], None], Any]]:
    """Every (system, operation): its measured body and what prepares it (untimed)."""
    awa, pgq, bare = systems["awa_django"], systems["pgqueuer"], systems["bare"]

    def drained(system: Any, lanes: int, run: Callable[[], None]) -> Any:
        return (run, lambda: (system.reset(), system.preload(jobs, lanes)))

    return {
        "awa_django enqueue, autocommit": (lambda: awa.enqueue_autocommit(jobs), awa.reset),
        "awa_django enqueue, in a transaction": (
            lambda: awa.enqueue_in_transaction(jobs),
            awa.reset,
        ),
        "pgqueuer enqueue, autocommit": (lambda: pgq.enqueue_autocommit(jobs), pgq.reset),
        "bare INSERT, autocommit": (lambda: bare.enqueue_autocommit(jobs), bare.reset),
        "awa_django bulk of 1,000": (lambda: awa.enqueue_bulk(jobs), awa.reset),
        "pgqueuer bulk of 1,000": (lambda: pgq.enqueue_bulk(jobs), pgq.reset),
        "bare COPY of 1,000": (lambda: bare.enqueue_bulk(jobs), bare.reset),
        "awa_django drain, 1 lane": drained(awa, 1, awa.drain),
        "awa_django drain, 201 lanes": drained(awa, 201, awa.drain),
        "pgqueuer drain": drained(pgq, 1, lambda: pgq.drain(jobs)),
        "bare claim loop": drained(bare, 1, bare.drain),
    }


def _summary(samples: list[dict[str, float]]) -> dict[str, list[float]]:
    keys = samples[0].keys()
    return {
        key: [
            statistics.median(s[key] for s in samples),
            min(s[key] for s in samples),
            max(s[key] for s in samples),
        ]
        for key in keys
    }


def _cell(summary: dict[str, list[float]], key: str) -> str:
    median, low, high = summary[key]
    return f"{median:,.0f} ({low:,.0f}-{high:,.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=4_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--only", nargs="*", help="operations whose name contains one of these")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    if args.jobs % BULK and args.jobs > BULK:
        parser.error(f"--jobs must be at most {BULK} or a multiple of it")
    url = os.environ.get("DATABASE_URL")
    if not url:
        sys.exit("DATABASE_URL is not set: run under scripts/with_postgres.py")
    counters = Counters(url)
    counters.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    systems = {"awa_django": Awa(url), "pgqueuer": PgQueuer(url), "bare": Bare(url)}
    chosen = {
        name: op
        for name, op in operations(systems, args.jobs).items()
        if not args.only or any(part in name for part in args.only)
    }
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in chosen}
    for rep in range(args.reps):
        for name, (run, prepare) in chosen.items():
            prepare()
            sample = measure(counters, args.jobs, run)
            samples[name].append(sample)
            print(
                f"rep {rep + 1} {name:40s} {sample['jobs_per_s']:9.0f} jobs/s "
                f"client {sample['client_cpu_us']:6.1f} µs "
                f"server {sample['server_cpu_us']:6.1f} µs "
                f"stmts {sample['statements']:5.2f} rows {sample['rows_written']:5.2f} "
                f"idx {sample['index_entries']:5.2f} wal {sample['wal_bytes']:7.0f} B",
                flush=True,
            )
    summary = {name: _summary(s) for name, s in samples.items()}
    print(
        "\n| operation | jobs/s | client CPU µs | server CPU µs | statements | rows | "
        "index entries | WAL bytes |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, s in summary.items():
        print(
            f"| {name} | {_cell(s, 'jobs_per_s')} | {_cell(s, 'client_cpu_us')} | "
            f"{_cell(s, 'server_cpu_us')} | {s['statements'][0]:.2f} | "
            f"{s['rows_written'][0]:.2f} | {s['index_entries'][0]:.2f} | "
            f"{s['wal_bytes'][0]:,.0f} |"
        )
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    output = args.output or RESULTS_DIR / f"cost-budget-{stamp}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(
        json.dumps(
            {"environment": collect(), "jobs": args.jobs, "samples": samples, "summary": summary},
            indent=1,
            default=str,
        )
    )
    print(f"\nwrote {output}")


if __name__ == "__main__":
    main()
