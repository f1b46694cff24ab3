"""A fleet of worker processes on one server (issue #37): what it holds, what it costs idle, how
fast it drains, how fast leadership fails over.

Usage (a throwaway cluster, as the other harnesses; needs a quiet machine)::

    python3 scripts/with_postgres.py -- .venv/bin/python -m benchmarks.fleet \
        [--workers 100] [--concurrency 3] [--queue-counts 1 10] [--jobs 100000] \
        [--idle-seconds 30] [--idle-warmup 60] [--drain-timeout 900] \
        [--parts idle failover drain single] [--awa JSON] [--output PATH]

For each number of queues (``q0`` ... ``q<k-1>``), ``--workers`` real ``awa_worker`` processes
each work every queue at ``--concurrency`` per queue, then:

- **connections**: the server's client backends, by ``application_name``, once all are ready;
- **idle cost**: over ``--idle-seconds`` with nothing to do, once the fleet has idled for
  ``--idle-warmup`` seconds past its start-up, the transactions committed on the
  database (``pg_stat_database.xact_commit``), the statements run (``pg_stat_statements``, when
  the server preloads it), per statement too (calls per second, the most frequent first), and
  the CPU the server's processes used (user + system time from ``/proc/<pid>/stat`` of the
  postmaster and its children, so the server must run on this machine), as a share of one core;
  and how many of the statements the server planned in the window (``plans_per_s``,
  ``plan_ms_per_s``, ``planned_share``, with ``pg_stat_statements.track_planning=on``: near
  all of them while the fleet is still starting, few in its steady state; a longer
  ``--idle-warmup`` reaches it);
  and that CPU split by the kind of process that spent it (``server_cpu``): per kind (a
  worker's session, the leader's and the queue candidates' told apart by the advisory locks
  they hold, its pooled connections, each of the server's own processes), the processes, their
  milliseconds of CPU (``/proc/<pid>/schedstat``) and wake-ups (voluntary context switches) a
  second, and the busiest processes with their last statement;
- **the server alone**: the same idle measures once before any worker starts (after the same
  warm-up), so that what the fleet costs is the difference (the server's own background work,
  autovacuum's visits and the checkpointer, is not the fleet's);
- **leader passes**: the durations the leader logged for its maintenance passes meanwhile;
- **failover**: the leader process is SIGKILLed; the time until another process says (in its
  runtime row) that it leads;
- **drain**: ``--jobs`` no-op jobs, spread over the queues, enqueued while the fleet runs; the
  time until every one completed, or, after ``--drain-timeout`` seconds, how many had (the
  drain is then recorded as timed out, not waited for). Meanwhile: the jobs done about every
  second, what the workers' backends were waiting for (``pg_stat_activity`` sampled every
  ``--sample-interval``), the statements run (per statement), the CPU of the workers and of
  the server, and per job done the transactions and the wake-ups (voluntary context switches)
  of the workers and of the server. Then the same with one process whose concurrency per
  queue is the fleet's total (``workers x concurrency``).

``--parts`` runs only some of the measurements (diagnostics at a small scale);
``--profile-worker PATH`` runs the fleet's first worker and the one process under cProfile
(their Python calls per job); ``--awa`` gives
the fleet AWA settings (a JSON object: ``'{"RUNTIME_SNAPSHOT_INTERVAL_S": 1}'`` runs a process's
snapshot statements ten times as often, so that a short warm-up reaches the steady state in
which they are no longer planned).

Writes everything and the environment to ``benchmarks/results/fleet-<UTC time>.json``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
PASS_LINE = re.compile(r"maintenance (\w+): .* duration_ms=([0-9.]+)")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SPAWNED = itertools.count()
PARTS = ("idle", "failover", "drain", "single")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=3, help="per queue and process")
    parser.add_argument("--queue-counts", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument(
        "--job-ms", type=float, default=0.0, help="each drained job sleeps this long (0: no-op)"
    )
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument(
        "--idle-warmup",
        type=float,
        default=60.0,
        help="seconds the ready fleet idles before the idle window (past its start-up)",
    )
    parser.add_argument("--ready-timeout", type=float, default=600.0)
    parser.add_argument(
        "--drain-timeout", type=float, default=900.0, help="give up a drain after this long"
    )
    parser.add_argument(
        "--sample-interval", type=float, default=0.5, help="wait-event sampling during a drain"
    )
    parser.add_argument(
        "--top-statements", type=int, default=15, help="statements listed per measurement"
    )
    parser.add_argument(
        "--awa",
        type=json.loads,
        default={},
        help="AWA settings for the fleet, as a JSON object (e.g. shorter intervals, so that an "
        "idle window past a short warm-up measures the steady state)",
    )
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--output", type=Path)
    parser.add_argument("--log-dir", type=Path, help="keep the workers' logs there")
    parser.add_argument(
        "--profile-worker",
        type=Path,
        help="run the first worker of each fleet, and the one process, under cProfile, their "
        "stats written there (the cell's queue count appended, and .single) when they stop: "
        "the Python calls per job they ran",
    )
    return parser.parse_args(argv)


class Worker:
    """One ``awa_worker`` process, its log in a file (a pipe per process would need a reader)."""

    def __init__(
        self,
        queues: dict[str, int],
        env: dict[str, str],
        logdir: Path,
        n: int,
        profile: Path | None = None,
    ) -> None:
        self.log_path = logdir / f"worker-{n}.log"  # n counts every process of the run
        self._log = self.log_path.open("wb")
        argv = [sys.executable]
        if profile is not None:
            argv += ["-m", "cProfile", "-o", str(profile)]
        argv += ["manage.py", "awa_worker", "-v", "2"]
        argv += [f"--queue={name}={concurrency}" for name, concurrency in queues.items()]
        self.proc = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"worker exited ({self.proc.returncode}):\n{self.output()[-3000:]}")
        return "worker ready" in self.output()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


def start_fleet(
    count: int,
    queues: dict[str, int],
    logdir: Path,
    ready_timeout: float,
    profile: Path | None = None,
) -> list[Worker]:
    """``count`` workers, the first under cProfile when ``profile`` names its stats file."""
    # AWA_OVERRIDES (set by main) declares the queues; --queue picks them and their concurrency.
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "benchmarks.settings", "PYTHONUNBUFFERED": "1"}
    workers = [
        Worker(queues, env, logdir, next(SPAWNED), profile if i == 0 else None)
        for i in range(count)
    ]
    deadline = time.monotonic() + ready_timeout
    while not all(w.ready() for w in workers):
        if time.monotonic() > deadline:
            raise RuntimeError("the fleet was not ready in time")
        time.sleep(0.2)
    return workers


def scalar(sql: str, params: list[Any] | None = None) -> Any:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else row[0]


def connections_by_name() -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT application_name, count(*) FROM pg_stat_activity "
            "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() GROUP BY 1"
        )
        return {name or "(none)": count for name, count in cursor.fetchall()}


def backend_parent() -> int | None:
    pid = scalar("SELECT pg_backend_pid()")
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1])


def postmaster_cpu_s(postmaster: int) -> float:
    """User + system seconds of the postmaster's children alive now (the server's processes)."""
    children = Path(f"/proc/{postmaster}/task/{postmaster}/children")
    pids = [int(p) for p in children.read_text().split()] if children.exists() else []
    total = 0
    for pid in [postmaster, *pids]:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


# Session advisory locks as pg_locks shows them (classid, objid, objsubid): the maintenance
# leader's 64-bit key (maintenance/leader.py) and a queue's candidate lock (sql/queries/wake.sql),
# which tell the leader's and the candidates' session backends from the others.
LEADER_LOCK = (0x4157415F, 0x4D41494E, 1)
CANDIDATE_LOCK_CLASS = 1096237399
BACKENDS = (
    "SELECT a.pid, a.backend_type, coalesce(a.application_name, ''), "
    "EXISTS (SELECT FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory' "
    "AND l.granted AND l.classid = %s AND l.objid = %s AND l.objsubid = %s), "
    "EXISTS (SELECT FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory' "
    "AND l.granted AND l.classid = %s AND l.objsubid = 2), "
    "left(split_part(ltrim(a.query, '- '), E'\\n', 1), 60) "
    "FROM pg_stat_activity a"
)


def backend_kinds() -> dict[int, tuple[str, str]]:
    """Each server process's kind and last statement (its first line), by pid: a worker's
    session split into the leader's, a queue candidate's and the others', its pool's
    connections, and the server's own processes by ``backend_type``."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(BACKENDS, [*LEADER_LOCK, CANDIDATE_LOCK_CLASS])
        rows = cursor.fetchall()
        cursor.execute("SELECT pg_backend_pid()")
        (own,) = cursor.fetchone()
    kinds = {}
    for pid, backend_type, app, leader, candidate, query in rows:
        if pid == own:
            kind = "harness"
        elif backend_type != "client backend":
            kind = backend_type
        elif app == "awa_worker_session":
            roles = [role for role, held in (("leader", leader), ("candidate", candidate)) if held]
            kind = f"session ({', '.join(roles)})" if roles else "session"
        elif app == "awa_worker":
            kind = "pool"
        else:
            kind = f"client {app or '(none)'}"
        kinds[int(pid)] = (kind, query or "")
    return kinds


def process_runtime(pid: int) -> tuple[float, int]:
    """(CPU seconds, voluntary context switches) of one process so far, (0, 0) once it is gone.
    The CPU time from ``/proc/<pid>/schedstat`` (nanoseconds; ``/proc/<pid>/stat`` counts ticks
    of 10 ms, too coarse for a backend that runs a statement now and then); each voluntary
    switch is one time the process went to sleep, so they count its wake-ups."""
    return process_runtime_of(Path(f"/proc/{pid}"))


def process_runtime_of(proc: Path) -> tuple[float, int]:
    """``process_runtime`` of a ``/proc`` entry: a process, or one thread (``task/<tid>``)."""
    try:
        runtime_ns = int((proc / "schedstat").read_text().split()[0])
        status = (proc / "status").read_text()
    except (OSError, ValueError, IndexError):
        return 0.0, 0
    switches = re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.MULTILINE)
    return runtime_ns / 1e9, int(switches.group(1)) if switches else 0


def backend_runtimes(postmaster: int) -> dict[int, tuple[float, int]]:
    """``process_runtime`` of the postmaster and of each of its children alive now, by pid."""
    children = Path(f"/proc/{postmaster}/task/{postmaster}/children")
    pids = [int(p) for p in children.read_text().split()] if children.exists() else []
    return {pid: process_runtime(pid) for pid in [postmaster, *pids]}


def cpu_by_kind(
    postmaster: int,
    before: tuple[dict[int, tuple[float, int]], dict[int, tuple[str, str]]],
    after: tuple[dict[int, tuple[float, int]], dict[int, tuple[str, str]]],
    seconds: float,
    top: int,
) -> dict[str, Any]:
    """The server's CPU over a window split by the kind of process that spent it (#37): per
    kind, its processes, their milliseconds of CPU and wake-ups a second; and the ``top``
    busiest processes. A process that started meanwhile counts all its time, one that ended
    none of it."""
    (run0, kinds0), (run1, kinds1) = before, after
    per_kind: dict[str, dict[str, float]] = {}
    busiest = []
    for pid, (cpu, switches) in run1.items():
        kind, query = (
            kinds1.get(pid)
            or kinds0.get(pid)
            or (("postmaster", "") if pid == postmaster else ("(ended)", ""))
        )
        cpu0, switches0 = run0.get(pid, (0.0, 0))
        ms, wakeups = (cpu - cpu0) * 1000 / seconds, (switches - switches0) / seconds
        entry = per_kind.setdefault(
            kind, {"processes": 0, "cpu_ms_per_s": 0.0, "wakeups_per_s": 0.0}
        )
        entry["processes"] += 1
        entry["cpu_ms_per_s"] += ms
        entry["wakeups_per_s"] += wakeups
        busiest.append(
            {
                "pid": pid,
                "kind": kind,
                "cpu_ms_per_s": round(ms, 3),
                "wakeups_per_s": round(wakeups, 2),
                "last": query,
            }
        )
    busiest.sort(key=lambda row: -float(row["cpu_ms_per_s"]))
    return {
        "by_kind": {
            kind: {
                "processes": entry["processes"],
                "cpu_ms_per_s": round(entry["cpu_ms_per_s"], 3),
                "wakeups_per_s": round(entry["wakeups_per_s"], 2),
            }
            for kind, entry in sorted(per_kind.items(), key=lambda item: -item[1]["cpu_ms_per_s"])
        },
        "busiest": busiest[:top],
    }


def enable_statement_counts() -> None:
    """pg_stat_statements in this database, when the server preloads it (else counts are None)."""
    from django.db import connection

    try:
        with connection.cursor() as cursor:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    except Exception:
        connection.close()


def process_cpu_s(pid: int) -> float:
    """User + system seconds of one process (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def machine_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine since boot (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


# A statement's counts in pg_stat_statements: text, calls, milliseconds executing, plans and
# milliseconds planning (both 0 unless the server sets pg_stat_statements.track_planning).
Counts = tuple[str, int, float, int, float]


def statement_counts() -> dict[str, Counts] | None:
    """Per statement of this database (pg_stat_statements): queryid -> its ``Counts``; None
    without the extension."""
    from django.db import connection

    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT queryid::text, query, calls, total_exec_time, plans, total_plan_time "
                "FROM pg_stat_statements "
                "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
            return {
                str(q): (text, int(calls), float(ms), int(plans), float(plan_ms))
                for q, text, calls, ms, plans, plan_ms in cursor
            }
    except Exception:
        connection.close()  # the failed statement left the connection unusable
        return None


def statements_between(
    before: dict[str, Counts] | None,
    after: dict[str, Counts] | None,
    seconds: float,
    top: int,
) -> tuple[dict[str, float] | None, list[dict[str, Any]] | None]:
    """Between two ``statement_counts``: the totals per second (``statements_per_s``, and
    ``plans_per_s`` and ``plan_ms_per_s``: the statements planned in the window, and their
    share of the calls, ``planned_share``), and the ``top`` most called statements (calls and
    milliseconds executing per second, and plans and milliseconds planning per second, the text
    shortened), this harness's own reads left out of the list but not of the totals. Planning is
    outside the execution time: a statement an idle process runs now and then is planned on its
    first runs on each connection, so the planned share tells a window of a fleet still starting
    (near 1) from one of a fleet in its steady state (#37)."""
    if before is None or after is None:
        return None, None
    rows = []
    calls_total = plans_total = 0
    plan_ms_total = 0.0
    for queryid, (text, calls, ms, plans, plan_ms) in after.items():
        _, calls0, ms0, plans0, plan_ms0 = before.get(queryid, ("", 0, 0.0, 0, 0.0))
        if calls > calls0:
            calls_total += calls - calls0
            plans_total += plans - plans0
            plan_ms_total += plan_ms - plan_ms0
            rows.append((calls - calls0, ms - ms0, plans - plans0, plan_ms - plan_ms0, text))
    rows.sort(key=lambda row: -row[0])
    listed = [
        {
            "calls_per_s": round(calls / seconds, 3),
            "ms_per_s": round(ms / seconds, 3),
            "plans_per_s": round(plans / seconds, 3),
            "plan_ms_per_s": round(plan_ms / seconds, 3),
            "query": " ".join(text.split())[:160],
        }
        for calls, ms, plans, plan_ms, text in rows
        if "pg_stat_" not in text
    ]
    totals = {
        "statements_per_s": calls_total / seconds,
        "plans_per_s": plans_total / seconds,
        "plan_ms_per_s": plan_ms_total / seconds,
        "planned_share": plans_total / calls_total if calls_total else 0.0,
    }
    return totals, listed[:top]


def measure_idle(seconds: float, top: int) -> dict[str, Any]:
    postmaster = backend_parent()
    xact = "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
    commits0, statements0 = int(scalar(xact)), statement_counts()
    cpu0 = postmaster_cpu_s(postmaster) if postmaster else None
    backends0 = (backend_runtimes(postmaster), backend_kinds()) if postmaster else None
    started = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - started
    commits1, statements1 = int(scalar(xact)), statement_counts()
    cpu1 = postmaster_cpu_s(postmaster) if postmaster else None
    backends1 = (backend_runtimes(postmaster), backend_kinds()) if postmaster else None
    totals, by_statement = statements_between(statements0, statements1, elapsed, top)
    return {
        "seconds": elapsed,
        "transactions_per_s": (commits1 - commits0) / elapsed,
        # statements_per_s, plans_per_s, plan_ms_per_s, planned_share (None without
        # pg_stat_statements; the plans are 0 without track_planning).
        **(totals or {"statements_per_s": None}),
        # Processes that ended during the window (none should) are not counted.
        "server_cpu_share_of_a_core": (
            None if cpu0 is None or cpu1 is None else (cpu1 - cpu0) / elapsed
        ),
        "statements": by_statement,
        # Where the server's CPU went, by the kind of connection (or server process) that spent
        # it: most of an idle fleet's is outside the statements pg_stat_statements times.
        "server_cpu": (
            None
            if postmaster is None or backends0 is None or backends1 is None
            else cpu_by_kind(postmaster, backends0, backends1, elapsed, top)
        ),
    }


def leader_instance() -> tuple[str, int] | None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT instance_id, pid FROM awa.runtime_instances WHERE is_leader "
            "AND last_seen_at > now() - interval '30 seconds' ORDER BY last_seen_at DESC LIMIT 1"
        )
        row = cursor.fetchone()
    return None if row is None else (row[0], int(row[1]))


def measure_failover(workers: list[Worker]) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while (leader := leader_instance()) is None:
        if time.monotonic() > deadline:
            return {"error": "no leader"}
        time.sleep(0.1)
    old_id, pid = leader
    victim = next(w for w in workers if w.proc.pid == pid)
    victim.proc.kill()
    killed = time.monotonic()
    while True:
        now = leader_instance()
        if now is not None and now[0] != old_id:
            return {"seconds": time.monotonic() - killed, "killed_pid": pid}
        if time.monotonic() - killed > 120:
            return {"error": "no new leader within 120 s", "killed_pid": pid}
        time.sleep(0.02)


# Jobs enqueued but not yet done. Ring prune truncates a slot's ready and done rows together,
# and only once nothing in it is live, so the difference holds across it; cheaper than reading
# awa.jobs every sample.
REMAINING = (
    "SELECT (SELECT count(*) FROM awa.ready_entries) - (SELECT count(*) FROM awa.done_entries)"
)
# Backends waiting for a lock are told apart by their statement (its first comment line names
# it): which statements wait for which.
WAITS = (
    "SELECT application_name, state, coalesce(wait_event_type, 'CPU'), "
    "coalesce(wait_event, '-') || CASE WHEN wait_event_type = 'Lock' "
    "THEN ' ' || left(split_part(ltrim(query, '- '), E'\\n', 1), 60) ELSE '' END, "
    "count(*) FROM pg_stat_activity "
    "WHERE application_name LIKE 'awa_worker%' GROUP BY 1, 2, 3, 4"
)


XACT_COMMIT = "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"


def drain_wakeups(postmaster: int | None, workers: list[Worker]) -> tuple[int, int]:
    """Voluntary context switches so far of the workers (every thread) and of the server's
    processes (those alive now)."""
    fleet = 0
    for worker in workers:
        for task in Path(f"/proc/{worker.proc.pid}/task").glob("*"):
            fleet += process_runtime_of(task)[1]
    server = sum(s for _, s in backend_runtimes(postmaster).values()) if postmaster else 0
    return fleet, server


def drain(queues: list[str], args: argparse.Namespace, workers: list[Worker]) -> dict[str, Any]:
    """Enqueue ``args.jobs`` no-op jobs and wait until they are done, or ``args.drain_timeout``
    has passed: then the drain is recorded as timed out with how far it got."""
    from django.db import connection

    import awa_django as awa
    from benchmarks.jobs import SLEEP_KIND, SYNC_KIND

    postmaster = backend_parent()
    statements0 = statement_counts()
    commits0 = int(scalar(XACT_COMMIT))
    switches0 = drain_wakeups(postmaster, workers)
    cpu_workers0 = {w.proc.pid: process_cpu_s(w.proc.pid) for w in workers}
    cpu_server0 = postmaster_cpu_s(postmaster) if postmaster else None
    machine0 = machine_ticks()
    started = time.monotonic()
    batch = 5000
    for start in range(0, args.jobs, batch):
        size = min(batch, args.jobs - start)
        queue = queues[(start // batch) % len(queues)]
        if args.job_ms:
            awa.enqueue_many(
                SLEEP_KIND,
                [{"n": n, "ms": args.job_ms} for n in range(start, start + size)],
                queue=queue,
            )
        else:
            awa.enqueue_many(
                SYNC_KIND,
                [{"n": n, "payload": ""} for n in range(start, start + size)],
                queue=queue,
            )
    enqueued_s = time.monotonic() - started
    waits: dict[str, int] = {}
    samples = 0
    progress: list[tuple[float, int]] = []
    next_progress = 0.0
    remaining = args.jobs
    while True:
        now = time.monotonic() - started
        remaining = int(scalar(REMAINING))
        if now >= next_progress:
            progress.append((round(now, 2), args.jobs - remaining))
            next_progress = now + 1.0
        if remaining <= 0 or now > args.drain_timeout:
            break
        with connection.cursor() as cursor:
            cursor.execute(WAITS)
            for app, state, kind, event, count in cursor.fetchall():
                key = f"{app} {state} {kind}:{event}"
                waits[key] = waits.get(key, 0) + count
        samples += 1
        time.sleep(args.sample_interval)
    elapsed = time.monotonic() - started
    if progress[-1][1] != args.jobs - remaining:
        progress.append((round(elapsed, 2), args.jobs - remaining))
    machine1 = machine_ticks()
    commits = int(scalar(XACT_COMMIT)) - commits0
    switches1 = drain_wakeups(postmaster, workers)
    # A process that died meanwhile counts 0, not minus its past.
    per_worker = sorted(max(process_cpu_s(pid) - cpu, 0.0) for pid, cpu in cpu_workers0.items())
    cpu_server = postmaster_cpu_s(postmaster) if postmaster else None
    totals, by_statement = statements_between(
        statements0, statement_counts(), elapsed, args.top_statements
    )
    done = args.jobs - remaining
    return {
        "seconds": elapsed,
        "jobs": args.jobs,
        "done": done,
        "timed_out": remaining > 0,
        "jobs_per_s": done / elapsed,
        "enqueue_s": enqueued_s,
        "progress": progress,
        # Mean backends per sample in each state and wait (CPU: running, waiting for nothing).
        "waits": {
            key: round(count / max(samples, 1), 2)
            for key, count in sorted(waits.items(), key=lambda item: -item[1])
        },
        "statements_per_s": None if totals is None else totals["statements_per_s"],
        "statements": by_statement,
        # Per job done: transactions committed (late reports of idle backends aside), and
        # wake-ups (voluntary context switches) of the workers and of the server's processes.
        "transactions_per_job": commits / max(done, 1),
        "worker_wakeups_per_job": (switches1[0] - switches0[0]) / max(done, 1),
        "server_wakeups_per_job": (switches1[1] - switches0[1]) / max(done, 1),
        "workers_cpu_share_of_a_core": sum(per_worker) / elapsed,
        # Each worker's share of a core, least to most busy: work spread or concentrated.
        "per_worker_cpu_share": [round(cpu / elapsed, 3) for cpu in per_worker],
        # Share of every CPU of the machine busy meanwhile (anything else running included):
        # near 1, the drain was CPU-bound.
        "machine_cpu_busy": (machine1[0] - machine0[0]) / max(machine1[1] - machine0[1], 1),
        "server_cpu_share_of_a_core": (
            None
            if cpu_server is None or cpu_server0 is None
            else (cpu_server - cpu_server0) / elapsed
        ),
    }


# The code a worker runs per job (its start-up, Django's and the imports', is mostly elsewhere).
PER_JOB_CODE = (
    "awa_django/worker/",
    "awa_django/storage/",
    "awa_django/core/",
    "asyncio/",
    "psycopg",
)


def profiled_calls(path: Path) -> dict[str, Any]:
    """What the profiled worker ran: its jobs (calls of the dispatcher's ``_start``, once per
    job), its Python calls in all and those of the code a job runs through (``PER_JOB_CODE``:
    the worker, storage, asyncio and psycopg; start-up calls some of it too) per job, and the
    functions of that code it called most per job."""
    import pstats

    stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    jobs = sum(
        entry[1]
        for (file, _, name), entry in stats.items()
        if name == "_start" and file.endswith("dispatcher.py")
    )
    per_job = max(jobs, 1)
    runtime = {key: e for key, e in stats.items() if any(p in key[0] for p in PER_JOB_CODE)}
    most = sorted(runtime.items(), key=lambda item: -item[1][1])[:25]
    return {
        "jobs": jobs,
        "calls": sum(e[1] for e in stats.values()),
        "per_job_code_calls_per_job": sum(e[1] for e in runtime.values()) / per_job,
        "most_called_per_job": [
            {
                "function": f"{file.split('site-packages/')[-1]}:{line}:{name}",
                "per_job": round(e[1] / per_job, 2),
            }
            for (file, line, name), e in most
        ],
    }


def pass_durations(workers: list[Worker]) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {}
    for worker in workers:
        for match in PASS_LINE.finditer(worker.output()):
            found.setdefault(match.group(1), []).append(float(match.group(2)))
    return found


def measure_server_alone(args: argparse.Namespace) -> dict[str, Any]:
    """The idle measures with no worker running: the server's own share, which the fleet's
    idle figures include."""
    from awa_django.testing import reset_queue

    reset_queue()
    time.sleep(args.idle_warmup)
    alone = measure_idle(args.idle_seconds, args.top_statements)
    alone["warmup_s"] = args.idle_warmup
    print(f"[server alone] idle {json.dumps(alone, indent=1)}", flush=True)
    return alone


def fleet_share(cell: dict[str, Any], alone: dict[str, Any]) -> float | None:
    """The server CPU an idle fleet adds to the server alone, as a share of a core."""
    fleet, base = cell["idle"]["server_cpu_share_of_a_core"], alone["server_cpu_share_of_a_core"]
    return None if fleet is None or base is None else fleet - base


def run_cell(args: argparse.Namespace, queue_count: int, logdir: Path) -> dict[str, Any]:
    from awa_django.testing import reset_queue

    names = [f"q{i}" for i in range(queue_count)]
    label = f"[{queue_count} queues]"
    reset_queue()
    result: dict[str, Any] = {"queues": queue_count, "workers": args.workers}
    profile = args.profile_worker
    if profile is not None:
        profile = profile.with_name(f"{profile.name}.{queue_count}")
    fleet = start_fleet(
        args.workers, dict.fromkeys(names, args.concurrency), logdir, args.ready_timeout, profile
    )
    try:
        result["connections"] = connections_by_name()
        print(f"{label} connections {result['connections']}", flush=True)
        if "idle" in args.parts:
            # Past start-up: each process's first statements on each of its connections plan
            # (psycopg prepares a statement at its fifth run on a connection, and the server
            # plans its first five runs as prepared too) and load the catalog, and backends
            # report their transactions to pg_stat_database only a while after they ran, so
            # a window that opens at once counts start-up, not an idle fleet (#37).
            time.sleep(args.idle_warmup)
            result["idle"] = measure_idle(args.idle_seconds, args.top_statements)
            result["idle"]["warmup_s"] = args.idle_warmup
            print(f"{label} idle {json.dumps(result['idle'], indent=1)}", flush=True)
        result["leader_pass_ms"] = pass_durations(fleet)
        if "failover" in args.parts:
            result["failover"] = measure_failover(fleet)
            print(f"{label} failover {result['failover']}", flush=True)
        alive = [w for w in fleet if w.proc.poll() is None]
        if "drain" in args.parts:
            result["drain_fleet"] = drained = drain(names, args, alive)
            result["drain_fleet_s"] = drained["seconds"]
            result["fleet_jobs_per_s"] = drained["jobs_per_s"]
            print(f"{label} fleet drain {json.dumps(drained, indent=1)}", flush=True)
        result["leader_pass_ms"] = pass_durations(alive)
    finally:
        for worker in fleet:
            worker.stop()
    if profile is not None and profile.exists():
        result["profiled_worker"] = profiled_calls(profile)
        print(f"{label} profiled worker {result['profiled_worker']}", flush=True)
    if "single" in args.parts:
        reset_queue()
        single_profile = None if profile is None else profile.with_name(f"{profile.name}.single")
        single = start_fleet(
            1,
            dict.fromkeys(names, args.workers * args.concurrency),
            logdir,
            args.ready_timeout,
            single_profile,
        )
        try:
            result["drain_single"] = drained = drain(names, args, single)
            result["drain_single_s"] = drained["seconds"]
            result["single_jobs_per_s"] = drained["jobs_per_s"]
            print(f"{label} one process {json.dumps(drained, indent=1)}", flush=True)
        finally:
            single[0].stop()
        if single_profile is not None and single_profile.exists():
            result["profiled_single"] = profiled_calls(single_profile)
            print(f"{label} profiled single {result['profiled_single']}", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")
    queues = {f"q{i}": {"concurrency": args.concurrency} for i in range(max(args.queue_counts))}
    os.environ["AWA_OVERRIDES"] = json.dumps({**args.awa, "QUEUES": queues, "DEFAULT_QUEUE": "q0"})
    import django

    django.setup()
    from django.core.management import call_command

    from benchmarks import environment

    call_command("migrate", verbosity=0, interactive=False)
    enable_statement_counts()
    env = environment.collect()
    with tempfile.TemporaryDirectory(prefix="awa-fleet-") as tmp:
        logdir = args.log_dir or Path(tmp)
        logdir.mkdir(parents=True, exist_ok=True)
        alone = measure_server_alone(args) if "idle" in args.parts else None
        cells = [run_cell(args, count, logdir) for count in args.queue_counts]
    if alone is not None:
        for cell in cells:
            cell["idle"]["fleet_cpu_share_of_a_core"] = share = fleet_share(cell, alone)
            print(f"[{cell['queues']} queues] idle fleet over the server alone: {share}")
    env["machine"]["loadavg_at_end"] = list(os.getloadavg())
    output = args.output or RESULTS_DIR / (
        f"fleet-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(
        json.dumps(
            {
                "args": {
                    **vars(args),
                    "output": str(output),
                    "log_dir": str(args.log_dir),
                    "profile_worker": str(args.profile_worker),
                },
                "server_alone": alone,
                "cells": cells,
                **env,
            },
            indent=2,
        )
    )
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
