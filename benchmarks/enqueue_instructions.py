"""The server's instructions per enqueue, counted by valgrind (#32): a count the machine's load
does not move, where timings on a shared machine differ by a fifth from run to run.

Usage (valgrind installed; the server's binaries and data directory on this machine, as
``scripts/with_postgres.py`` makes them)::

    python3 scripts/with_postgres.py -- .venv/bin/python -m benchmarks.enqueue_instructions \
        [--before 0036_bulk_cost] [--iterations 200]

The schema is migrated (to ``--before``, then to the latest migration), and for each a copy of
the idle cluster's data directory runs a procedure in single-user mode under ``valgrind
--tool=callgrind``: a loop of enqueues into ``bench`` that commits after each, with the calls in
PL/pgSQL (no client statement to parse or plan): ``autocommit`` (``awa.enqueue_job_alone``),
``in a transaction`` (``awa.enqueue_job`` and the commit's publication) and ``two queues in a
transaction`` (one job into each of two queues). The count per unit is the difference between
a loop of 10 + N and one of 10 units, over N, so the session's start and the first calls
(catalog caches, plans) are left out.
"""

from __future__ import annotations

import argparse
import os
import pwd
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.enqueue_profile import ATOMIC, AUTOCOMMIT, SECOND_QUEUE, TWO_QUEUES
from benchmarks.profile_setup import migrated_django, statements_monitor

JOB = "'bench.kind', '{queue}', 0::smallint, '{{\"n\": 0}}'::jsonb, 25, NULL, '{{}}', '{{}}'"
FIRST, SECOND = JOB.format(queue="bench"), JOB.format(queue=SECOND_QUEUE)
CALLS = {
    AUTOCOMMIT: f"j := awa.enqueue_job_alone({FIRST});",
    ATOMIC: f"j := awa.enqueue_job({FIRST});",
    TWO_QUEUES: f"j := awa.enqueue_job({FIRST}); j := awa.enqueue_job({SECOND});",
}
LOOP = f"""
CREATE OR REPLACE PROCEDURE public.awa_enqueue_loop(n integer, mode text)
LANGUAGE plpgsql AS $$
DECLARE
    j bigint;
BEGIN
    FOR i IN 1 .. n LOOP
        IF mode = 'autocommit' THEN {CALLS[AUTOCOMMIT]}
        ELSIF mode = 'in a transaction' THEN {CALLS[ATOMIC]}
        ELSE {CALLS[TWO_QUEUES]}
        END IF;
        COMMIT;
    END LOOP;
END
$$
"""


def _instructions(bindir: Path, data: Path, mode: str, units: int) -> int:
    """Instructions of a single-user session running the loop 10 times, then ``units``."""
    out = data.parent / "callgrind.out"
    script = (
        "SET synchronous_commit = off;\n"
        f"CALL public.awa_enqueue_loop(10, '{mode}');\n"
        f"CALL public.awa_enqueue_loop({units}, '{mode}');\n"
    )
    command = [
        "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
        str(bindir / "postgres"), "--single", "-D", str(data),
        "-c", "shared_preload_libraries=", "-c", "max_connections=20", "awa",
    ]  # fmt: skip
    if os.geteuid() == 0:  # the cluster is the postgres user's (scripts/with_postgres.py)
        command = ["runuser", "-u", pwd.getpwuid(data.stat().st_uid).pw_name, "--", *command]
    subprocess.run(command, input=script, text=True, check=True, capture_output=True)
    match = re.search(r"^summary: (\d+)", out.read_text(), re.MULTILINE)
    assert match, f"no summary in {out}"
    return int(match.group(1))


def _per_unit(bindir: Path, source: Path, *, iterations: int) -> dict[str, float]:
    """Instructions per unit of each mode, each on a fresh copy of ``source``."""
    counts: dict[str, float] = {}
    for mode in (AUTOCOMMIT, ATOMIC, TWO_QUEUES):
        spent = []
        for units in (0, iterations):
            with tempfile.TemporaryDirectory(prefix="awa-callgrind-") as scratch:
                os.chmod(scratch, 0o755)
                data = Path(scratch) / "data"
                shutil.copytree(source, data, symlinks=True)
                (data / "postmaster.pid").unlink()
                if os.geteuid() == 0:
                    shutil.chown(scratch, source.stat().st_uid, source.stat().st_gid)
                    for path in [data, *data.rglob("*")]:
                        os.chown(path, source.stat().st_uid, source.stat().st_gid)
                spent.append(_instructions(bindir, data, mode, units))
        counts[mode] = (spent[1] - spent[0]) / iterations
    return counts


def _setting(monitor: psycopg.Connection[Any], query: str) -> str:
    row = monitor.execute(query).fetchone()
    assert row is not None
    return str(row[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="0036_bulk_cost")
    parser.add_argument("--iterations", type=int, default=200)
    args = parser.parse_args()
    monitor = statements_monitor()
    migrated_django({"QUEUES": {queue: {"concurrency": 8} for queue in ("bench", SECOND_QUEUE)}})
    from django.core.management import call_command

    monitor.execute(LOOP)
    for queue in ("bench", SECOND_QUEUE):
        monitor.execute("SELECT awa.ensure_lanes(%s, 0::smallint)", [queue])
    source = Path(_setting(monitor, "SHOW data_directory"))
    bindir = Path(_setting(monitor, "SELECT setting FROM pg_config WHERE name = 'BINDIR'"))
    results: dict[str, dict[str, float]] = {}
    for side, target in (("before", args.before), ("after", None)):
        call_command("migrate", "awa_django", *([target] if target else []), verbosity=0)
        monitor.execute("CHECKPOINT")
        results[side] = _per_unit(bindir, source, iterations=args.iterations)
    for mode in (AUTOCOMMIT, ATOMIC, TWO_QUEUES):
        before, after = results["before"][mode], results["after"][mode]
        print(
            f"{mode}: {before:,.0f} -> {after:,.0f} instructions per unit ({after / before:.3f}x)"
        )


if __name__ == "__main__":
    main()
