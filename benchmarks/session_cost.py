"""What a new server session's first enqueue costs the server, against the next one (#32).

Usage (it creates and drops its own database on the server of ``DATABASE_URL``, which must run
on this machine: the backend's CPU is read from ``/proc/<pid>/schedstat``)::

    python3 scripts/with_postgres.py -- .venv/bin/python -m benchmarks.session_cost [--sessions 20]

Each of ``--sessions`` fresh connections runs, one statement at a time with a commit after
each: awa_django's enqueue (the statement ``awa.enqueue`` sends, ``SELECT awa.enqueue_job(...)``,
in a transaction, then the commit that publishes it) three times; and, on other fresh
connections, a bare ``INSERT`` of the same arguments into a table with one index, twice. For
each step it records the backend's CPU time (nanoseconds on the CPU, which a busy machine does
not inflate the way it does wall time) and prints the medians. Django's default
``CONN_MAX_AGE = 0`` pays the first enqueue on every request (``awa.W054``); docs/benchmarks.md
("A new session per request") has the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections.abc import Sequence
from typing import Any

import psycopg

from benchmarks.scenarios import job_args
from benchmarks.sidebyside.databases import Databases
from benchmarks.sidebyside.systems.awa_django import SYSTEM

ENQUEUE = (
    "SELECT awa.enqueue_job('bench.probe_async', 'bench', 0::smallint, %s::jsonb, 25,"
    " NULL::timestamptz, '{}'::jsonb, '{}'::text[])"
)
BARE_TABLE = "CREATE TABLE IF NOT EXISTS public.bare_jobs (id bigserial PRIMARY KEY, args jsonb)"
BARE_INSERT = "INSERT INTO public.bare_jobs (args) VALUES (%s::jsonb)"
COMMIT = "COMMIT"


def backend_cpu_ms(pid: int) -> float:
    with open(f"/proc/{pid}/schedstat") as stat:
        return int(stat.read().split()[0]) / 1e6


def session(url: str, steps: Sequence[str]) -> list[float]:
    """The backend CPU (ms) of each step, on a fresh connection."""
    args = json.dumps(job_args(1))
    with psycopg.connect(url) as conn:
        pid = conn.info.backend_pid
        spent = []
        for step in steps:
            before = backend_cpu_ms(pid)
            if step == COMMIT:
                conn.commit()
            else:
                conn.execute(step, [args])  # type: ignore[arg-type]
            spent.append(backend_cpu_ms(pid) - before)
        return spent


def medians(rows: list[list[float]]) -> list[float]:
    return [round(statistics.median(column), 3) for column in zip(*rows, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    args = parser.parse_args()
    dbs = Databases(os.environ["DATABASE_URL"], prefix="session_cost")
    dbs.install_template(SYSTEM)
    url = dbs.fresh(SYSTEM)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(BARE_TABLE)
    awa_steps = [ENQUEUE, COMMIT] * 3
    bare_steps = [BARE_INSERT, COMMIT] * 2
    report: dict[str, Any] = {"sessions": args.sessions}
    for name, steps in (("awa_django", awa_steps), ("bare_insert", bare_steps)):
        spent = medians([session(url, steps) for _ in range(args.sessions)])
        per_job = [round(spent[i] + spent[i + 1], 3) for i in range(0, len(spent), 2)]
        report[name] = {"steps_ms": spent, "statement_and_commit_ms": per_job}
        print(f"{name}: server CPU per enqueue and its commit, 1st, 2nd...: {per_job} ms")
    dbs.drop_all(SYSTEM)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
