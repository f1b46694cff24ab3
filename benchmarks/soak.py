"""The chaos soak (issue #35, part 3): a steady mixed load for half an hour while workers and
the maintenance leader are SIGKILLed every minute, with rotation and prune turning over all the
time; the invariant audit every minute, and a reconciliation of every job at the end. Not a
test: a benchmark, run on a quiet machine.

Usage (a throwaway cluster, as the other harnesses)::

    python3 scripts/with_postgres.py -- .venv/bin/python -m benchmarks.soak \\
        [--minutes 30] [--rate 300] [--workers 3] [--kill-every 60] [--audit-every 60] \\
        [--output PATH]

The load (``--rate`` jobs/s, enqueued in a transaction every 0.1 s): 85% jobs that complete,
5% that fail their first attempt and complete on the retry, 2% that fail every attempt and are
dead-lettered, 5% scheduled 5-30 s ahead (one in ten of them cancelled before it runs), 3% that
wait for an external callback, which the soak completes; plus a cron entry every minute.
Settings: ``benchmarks/soak_settings.py`` (0.5 s ring interval, 5 s retention).

Every ``--kill-every`` seconds one random worker is SIGKILLed and so is the maintenance leader
(when another process is leader), and both are replaced. Every ``--audit-every`` seconds:
``awa.audit.run()``, the dead tuples and sizes of the awa tables, the ring's generation, and
the pickup latency (first run minus enqueue) percentiles of the jobs that started in the
interval. At the end the load stops, the queue drains, and each kind is reconciled:
enqueued = completed + failed + dead-lettered + cancelled (+ still pending, which should be 0).

Writes everything to ``benchmarks/results/soak-<UTC time>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.close_timing import percentile

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"
SETTINGS = "benchmarks.soak_settings"
MIX = (
    ("soak.ok", 0.85),
    ("soak.retry", 0.05),
    ("soak.dead", 0.02),
    ("soak.scheduled", 0.05),
    ("soak.callback", 0.03),
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=300.0, help="jobs enqueued per second")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--kill-every", type=float, default=60.0, help="seconds between kills")
    parser.add_argument("--audit-every", type=float, default=60.0, help="seconds between audits")
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--output", type=Path)
    return parser.parse_args(argv)


class Worker:
    """One ``awa_worker`` process, its output kept in memory."""

    def __init__(self, number: int) -> None:
        self.number = number
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": SETTINGS, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "awa_worker", "--queue", "soak", "-v", "1"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        self.lines: list[str] = []
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if "worker ready" in line:
                self.ready.set()

    @property
    def leading(self) -> bool:
        """Became the maintenance leader and has not said it lost or released it since."""
        for line in reversed(self.lines):
            if "maintenance leader" in line and "became" in line:
                return True
            if "maintenance leadership" in line:
                return False
        return False

    def alive(self) -> bool:
        return self.proc.poll() is None


def setup_tables() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE IF NOT EXISTS soak_runs (job_id bigint, run_lease bigint, kind text,"
            " outcome text, enqueued timestamptz, started timestamptz)"
        )
        cursor.execute(
            "CREATE TABLE IF NOT EXISTS soak_tokens (token text PRIMARY KEY, job_id bigint,"
            " done boolean NOT NULL DEFAULT false)"
        )


class Producer(threading.Thread):
    """Enqueues the mix at ``rate`` jobs/s and cancels some scheduled jobs; counts what
    committed per kind."""

    def __init__(self, rate: float, rng: random.Random) -> None:
        super().__init__(daemon=True)
        self.rate = rate
        self.rng = rng
        self.stop = threading.Event()
        self.enqueued: Counter[str] = Counter()
        self.cancelled: Counter[str] = Counter()
        self.errors: list[str] = []

    def run(self) -> None:
        from django.db import connections, transaction

        import awa_django as awa

        kinds = [kind for kind, _ in MIX]
        weights = [weight for _, weight in MIX]
        carry = 0.0
        to_cancel: list[int] = []
        try:
            while not self.stop.is_set():
                tick = time.monotonic()
                carry += self.rate / 10
                count, carry = int(carry), carry - int(carry)
                try:
                    with transaction.atomic():
                        made: Counter[str] = Counter()
                        for kind in self.rng.choices(kinds, weights, k=count):
                            options: dict[str, Any] = {}
                            if kind == "soak.scheduled":
                                delay = self.rng.uniform(5, 30)
                                options["run_at"] = timedelta(seconds=delay)
                            job_id = awa.enqueue(kind, args={"t": time.time()}, **options)
                            if kind == "soak.scheduled" and self.rng.random() < 0.1:
                                to_cancel.append(job_id)
                            made[kind] += 1
                    self.enqueued.update(made)
                except Exception as error:  # a kill or a lost connection: that batch rolled back
                    self.errors.append(repr(error))
                    connections.close_all()
                while to_cancel:
                    if awa.cancel(to_cancel.pop(), reason="soak"):
                        self.cancelled["soak.scheduled"] += 1
                time.sleep(max(0.0, 0.1 - (time.monotonic() - tick)))
        finally:
            connections.close_all()


class Completer(threading.Thread):
    """Completes the callbacks the ``soak.callback`` handlers registered."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.completed: set[int] = set()
        self.stale = 0

    def run(self) -> None:
        from django.db import connection, connections

        import awa_django as awa

        try:
            while not self.stop.is_set():
                with connection.cursor() as cursor:
                    cursor.execute("SELECT token, job_id FROM soak_tokens WHERE NOT done LIMIT 500")
                    rows = cursor.fetchall()
                for token, job_id in rows:
                    try:
                        awa.complete_external(token)
                        self.completed.add(job_id)
                    except Exception:  # the attempt was rescued or closed meanwhile
                        self.stale += 1
                    with connection.cursor() as cursor:
                        cursor.execute(
                            "UPDATE soak_tokens SET done = true WHERE token = %s", [token]
                        )
                time.sleep(0.5)
        finally:
            connections.close_all()


def sample(since: float) -> dict[str, Any]:
    """The audit, table health and the pickup latency of jobs first started since ``since``."""
    from django.db import connection

    from awa_django.ops import audit

    started = time.monotonic()
    report = audit.run()
    audit_s = time.monotonic() - started
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, n_dead_tup, n_live_tup, pg_total_relation_size(relid)"
            " FROM pg_stat_user_tables WHERE schemaname = 'awa'"
        )
        tables = {name: {"dead": dead, "live": live, "bytes": size}
                  for name, dead, live, size in cursor.fetchall()}  # fmt: skip
        cursor.execute("SELECT max(generation) FROM awa.queue_ring_rotations")
        generation = cursor.fetchone()[0]
        cursor.execute(
            "SELECT extract(epoch FROM min(started) - min(enqueued)) FROM soak_runs"
            " WHERE kind IN ('soak.ok', 'soak.retry', 'soak.callback', 'soak.dead')"
            " GROUP BY job_id HAVING min(started) >= to_timestamp(%s)",
            [since],
        )
        pickups = sorted(float(row[0]) for row in cursor.fetchall())
        cursor.execute("SELECT state, count(*) FROM awa.jobs GROUP BY state")
        states = dict(cursor.fetchall())
    return {
        "at": datetime.now(UTC).isoformat(),
        "audit_held": report.held,
        "audit_broken": {f.name: list(f.ids) for f in report.findings if not f.held},
        "audit_s": round(audit_s, 3),
        "ring_generation": generation,
        "dead_tuples": sum(t["dead"] for t in tables.values()),
        "awa_bytes": sum(t["bytes"] for t in tables.values()),
        "tables": tables,
        "states": states,
        "pickup_s": {
            "n": len(pickups),
            **{f"p{q}": percentile(pickups, q / 100) if pickups else None for q in (50, 95, 99)},
            "max": pickups[-1] if pickups else None,
        },
    }


def reconcile(producer: Producer, completer: Completer) -> dict[str, Any]:
    """Per kind: enqueued = completed + failed + dead-lettered + cancelled + pending."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT kind, count(DISTINCT job_id) FROM soak_runs WHERE outcome = 'ok' GROUP BY kind"
        )
        completed = Counter(dict(cursor.fetchall()))
        cursor.execute("SELECT kind, count(*) FROM awa.dlq_entries GROUP BY kind")
        dead = Counter(dict(cursor.fetchall()))
        cursor.execute("SELECT kind, count(*) FROM awa.jobs WHERE state = 'failed' GROUP BY kind")
        failed = Counter(dict(cursor.fetchall()))
        cursor.execute(
            "SELECT kind, count(*) FROM awa.jobs WHERE state NOT IN"
            " ('completed', 'failed', 'cancelled', 'dlq') GROUP BY kind"
        )
        pending = Counter(dict(cursor.fetchall()))
        cursor.execute(
            "SELECT count(*) FROM (SELECT job_id FROM soak_runs WHERE outcome = 'ok'"
            " GROUP BY job_id HAVING count(*) > 1) twice"
        )
        completed_twice = cursor.fetchone()[0]
    completed["soak.callback"] = len(completer.completed)
    kinds = {}
    for kind, _ in MIX:
        row = {
            "enqueued": producer.enqueued[kind],
            "completed": completed[kind],
            "failed": failed[kind],
            "dead_lettered": dead[kind],
            "cancelled": producer.cancelled[kind],
            "pending": pending[kind],
        }
        row["balanced"] = row["enqueued"] == sum(
            row[k] for k in ("completed", "failed", "dead_lettered", "cancelled", "pending")
        )
        kinds[kind] = row
    return {"kinds": kinds, "cron_runs": completed["soak.cron"],
            "completed_twice": completed_twice}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", SETTINGS)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--no-input", verbosity=0)
    setup_tables()
    rng = random.Random(args.seed)
    workers = [Worker(n) for n in range(args.workers)]
    for worker in workers:
        worker.ready.wait(60)
    producer, completer = Producer(args.rate, rng), Completer()
    producer.start()
    completer.start()
    started = time.monotonic()
    end = started + args.minutes * 60
    next_kill, next_audit = started + args.kill_every, started + args.audit_every
    last_audit_wall = time.time()
    samples: list[dict[str, Any]] = []
    kills: list[dict[str, Any]] = []
    try:
        while time.monotonic() < end:
            time.sleep(0.5)
            now = time.monotonic()
            if now >= next_kill:
                next_kill += args.kill_every
                alive = [w for w in workers if w.alive()]
                victims = {rng.choice(alive).number}
                victims |= {w.number for w in alive if w.leading}
                for worker in workers:
                    if worker.number in victims and worker.alive():
                        kills.append({"at": round(now - started, 1), "worker": worker.number,
                                      "leader": worker.leading})  # fmt: skip
                        worker.proc.send_signal(signal.SIGKILL)
                        worker.proc.wait(10)
                        workers.append(Worker(len(workers)))
            if now >= next_audit:
                next_audit += args.audit_every
                wall = time.time()
                samples.append({"t_s": round(now - started, 1), **sample(last_audit_wall)})
                last_audit_wall = wall
                print(json.dumps({k: samples[-1][k] for k in
                                  ("t_s", "audit_held", "ring_generation", "dead_tuples",
                                   "pickup_s")}), flush=True)  # fmt: skip
        producer.stop.set()
        producer.join(30)
        drain_end = time.monotonic() + args.drain_timeout
        final = sample(last_audit_wall)
        while time.monotonic() < drain_end:
            final = sample(last_audit_wall)
            busy = {s: n for s, n in final["states"].items()
                    if s not in ("completed", "failed", "cancelled", "dlq")}  # fmt: skip
            if not busy:
                break
            time.sleep(2)
        completer.stop.set()
        completer.join(30)
    finally:
        for worker in workers:
            if worker.alive():
                worker.proc.terminate()
        for worker in workers:
            try:
                worker.proc.wait(60)
            except subprocess.TimeoutExpired:
                worker.proc.kill()
    result = {
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "settings": SETTINGS,
        "kills": kills,
        "samples": samples,
        "final": final,
        "reconciliation": reconcile(producer, completer),
        "producer_errors": producer.errors[:20],
        "stale_callbacks": completer.stale,
    }
    RESULTS_DIR.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    output = args.output or RESULTS_DIR / f"soak-{stamp}.json"
    output.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(json.dumps(result["reconciliation"], indent=2))
    print(f"final audit held: {final['audit_held']}; written to {output}")
    balanced = all(row["balanced"] for row in result["reconciliation"]["kinds"].values())
    return 0 if final["audit_held"] and balanced else 1


if __name__ == "__main__":
    sys.exit(main())
