"""Run the side-by-side workloads, print a table and write the results as JSON.

    python -m benchmarks.sidebyside [--systems ...] [--workloads ...] [--jobs 20000] [--reps 3]

The server comes from ``DATABASE_URL`` (``make bench`` starts a throwaway cluster); each system
gets databases of its own there (see ``databases.py``). Repetitions are interleaved: every
measurement once, then again, so noise from other tenants of a shared machine spreads over all
rows. The exit status is 1 if any run found a correctness problem.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.sidebyside import systems, workloads
from benchmarks.sidebyside.databases import Databases
from benchmarks.sidebyside.systems.base import System

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"
WORKLOADS = ("enqueue", "drain", "latency", "django", "soak", "scaleout", "tasks")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.sidebyside",
        description="Compare awa_django with other PostgreSQL job queues on one server.",
    )
    add = parser.add_argument
    add("--systems", nargs="+", choices=list(systems.MODULES), default=list(systems.MODULES))
    add("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    add("--jobs", type=int, default=20_000, help="jobs per enqueue and per drain")
    add("--single-jobs", type=int, default=None, help="jobs in the single loop (default --jobs)")
    add("--reps", type=int, default=3, help="repetitions of each measurement")
    add("--concurrency", type=int, nargs="+", default=[1, 8, 32, 128])
    add("--latency-count", type=int, default=200, help="single enqueues timed for latency")
    add("--django-requests", type=int, default=None, help="default: --jobs / 4")
    add("--soak-seconds", type=float, default=600.0)
    add("--soak-rate", type=int, default=300, help="jobs/s offered during the soak")
    add("--soak-sample", type=float, default=10.0, help="seconds between soak samples")
    add("--scale-processes", type=int, nargs="+", default=[1, 2, 4])
    add("--scale-concurrency", type=int, default=32, help="concurrency of each process")
    add(
        "--tasks-concurrency",
        type=int,
        nargs="+",
        default=[32],
        help="task drain concurrencies (awa_django: one worker; django_tasks_db: processes)",
    )
    add(
        "--tasks-db-processes",
        type=int,
        default=8,
        help="most db_worker processes a django_tasks_db task drain starts",
    )
    add("--output", type=Path, default=None, help="default: benchmarks/results/sbs-<time>.json")
    add(
        "--db-prefix",
        default=None,
        help="per-system database names start with this (default: DATABASE_URL's database name)",
    )
    add("--keep-databases", action="store_true", help="leave the per-system databases behind")
    args = parser.parse_args(argv)
    args.single_jobs = args.single_jobs or args.jobs
    args.django_requests = args.django_requests or max(1, args.jobs // 4)
    for option in (
        "jobs",
        "single_jobs",
        "reps",
        "latency_count",
        "django_requests",
        "concurrency",
        "scale_processes",
        "scale_concurrency",
        "soak_rate",
        "tasks_concurrency",
        "tasks_db_processes",
    ):
        value = getattr(args, option)
        if min(value if isinstance(value, list) else [value]) < 1:
            parser.error(f"--{option.replace('_', '-')} must be positive, got {value}")
    if args.soak_seconds <= 0 or args.soak_sample <= 0:
        parser.error("--soak-seconds and --soak-sample must be positive")
    return args


@dataclass
class Measurement:
    """One cell group of the table: a workload on a system, with its repetitions."""

    key: str
    system: str
    workload: str
    label: str
    run: Callable[[], dict[str, Any]]
    # The figure the table summarises, and whether higher is better.
    metric: str = "jobs_per_s"
    # Run in the first repetition only (the soak: its samples over time are the result).
    once: bool = False
    samples: list[dict[str, Any]] = field(default_factory=list)

    def summary(self, metric: str | None = None) -> dict[str, float | None]:
        values = [
            s[metric or self.metric]
            for s in self.samples
            if isinstance(s.get(metric or self.metric), int | float)
            and not math.isnan(s[metric or self.metric])
        ]
        if not values:
            return {"median": None, "min": None, "max": None}
        return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _soak_printer(system: str) -> Callable[[dict[str, Any]], None]:
    def show(point: dict[str, Any]) -> None:
        print(f"  [{system} soak] {point}", flush=True)

    return show


def build(args: argparse.Namespace, dbs: Databases, loaded: list[System]) -> list[Measurement]:
    found: list[Measurement] = []

    def add(system: System, workload: str, key: str, label: str, run: Any, **kw: Any) -> None:
        found.append(Measurement(f"{system.name}.{key}", system.name, workload, label, run, **kw))

    for s in loaded:
        if "tasks" in args.workloads:
            for mode in s.task_modes:
                for c in args.tasks_concurrency:
                    # A worker that runs one task at a time gets its concurrency as processes.
                    processes = min(c, args.tasks_db_processes) if s.one_task_per_process else 1
                    per_process = 1 if s.one_task_per_process else c
                    where = f", {processes} processes" if s.one_task_per_process else ""
                    add(
                        s,
                        "tasks",
                        f"tasks_{mode}_c{c}",
                        f"drain {args.jobs}, {mode}, c={c}{where}",
                        lambda s=s, m=mode, c=per_process, p=processes: workloads.drain(
                            dbs, s, args.jobs, c, m, processes=p
                        ),
                    )
        if s.tasks_only:
            continue
        if "enqueue" in args.workloads:
            add(
                s,
                "enqueue",
                "enqueue_bulk",
                f"bulk enqueue, {args.jobs} jobs",
                lambda s=s: workloads.enqueue_bulk(dbs, s, args.jobs),
            )
            add(
                s,
                "enqueue",
                "enqueue_single",
                f"single enqueue loop, {args.single_jobs} jobs",
                lambda s=s: workloads.enqueue_single(dbs, s, args.single_jobs),
            )
        if "drain" in args.workloads:
            for mode in s.modes:
                for c in args.concurrency:
                    add(
                        s,
                        "drain",
                        f"drain_{mode}_c{c}",
                        f"drain {args.jobs}, {mode}, c={c}",
                        lambda s=s, m=mode, c=c: workloads.drain(dbs, s, args.jobs, c, m),
                    )
        if "latency" in args.workloads:
            add(
                s,
                "latency",
                "latency",
                f"pickup latency, {args.latency_count} jobs (ms)",
                lambda s=s: workloads.pickup_latency(dbs, s, args.latency_count),
                metric="p50_ms",
            )
        if "django" in args.workloads:
            add(
                s,
                "django",
                "django",
                f"row + job per request, 4 threads, {args.django_requests} requests",
                lambda s=s: workloads.django_shaped(dbs, s, args.django_requests),
            )
        if "scaleout" in args.workloads:
            for p in args.scale_processes:
                add(
                    s,
                    "scaleout",
                    f"scaleout_p{p}",
                    f"drain {args.jobs}, {p} processes x c={args.scale_concurrency}",
                    lambda s=s, p=p: workloads.drain(
                        dbs, s, args.jobs, args.scale_concurrency, "async", processes=p
                    ),
                )
        if "soak" in args.workloads:
            add(
                s,
                "soak",
                "soak",
                f"soak {args.soak_seconds:.0f}s at {args.soak_rate}/s, horizon pinned",
                lambda s=s: workloads.soak(
                    dbs,
                    s,
                    args.soak_seconds,
                    args.soak_rate,
                    args.soak_sample,
                    on_sample=_soak_printer(s.name),
                ),
                metric="mean_jobs_per_s",
                once=True,
            )
    return found


def run_order(measurements: list[Measurement]) -> list[Measurement]:
    """``measurements`` grouped by workload, every system's run of one workload back to back.

    The machine is shared and its speed drifts over minutes: run system by system, a slow
    stretch lands on one system's whole block and skews its ratios; run workload by workload,
    it lands on all the systems it is comparing.
    """
    workloads_in_order = list(dict.fromkeys(m.key.split(".", 1)[1] for m in measurements))
    return sorted(measurements, key=lambda m: workloads_in_order.index(m.key.split(".", 1)[1]))


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if unit == "ms" else f"{value:,.0f}"


def table_rows(measurements: list[Measurement]) -> list[tuple[str, ...]]:
    rows = []
    for m in measurements:
        s = m.summary()
        unit = "ms" if m.metric.endswith("_ms") else "jobs/s"
        extra = ""
        if m.workload == "latency":
            p95, p99 = m.summary("p95_ms")["median"], m.summary("p99_ms")["median"]
            extra = f"p95 {_fmt(p95, 'ms')}, p99 {_fmt(p99, 'ms')}"
        elif m.workload in ("drain", "scaleout", "tasks"):
            extra = f"peak RSS {m.summary('peak_rss_mb')['median'] or 0:.0f} MB"
            worker_us = m.summary("worker_cpu_us_per_job")["median"]
            machine_us = m.summary("machine_cpu_us_per_job")["median"]
            busy = m.summary("machine_busy_share")["median"]
            if worker_us is not None and machine_us is not None and busy is not None:
                extra += (
                    f", CPU per job: worker {worker_us:.0f} µs, machine {machine_us:.0f} µs "
                    f"({busy:.0%} busy)"
                )
        elif m.workload == "soak":
            extra = (
                f"dead tuples max {m.summary('max_dead_tuples')['max'] or 0:,.0f}, "
                f"depth max {m.summary('max_depth')['max'] or 0:,.0f}"
            )
        problems = sum(len(x["problems"]) for x in m.samples)
        rows.append(
            (
                m.system,
                m.label,
                f"{_fmt(s['median'], unit)} {unit}",
                f"{_fmt(s['min'], unit)}-{_fmt(s['max'], unit)}",
                extra + (f"  PROBLEMS: {problems}" if problems else ""),
            )
        )
    return rows


def print_table(measurements: list[Measurement], reps: int) -> None:
    header = ("system", "measurement", f"median of {reps}", "min-max", "notes")
    rows = [header, *table_rows(measurements)]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for i, r in enumerate(rows):
        print(
            f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}  "
            f"{r[3]:>{widths[3]}}  {r[4]}"
        )
        if i == 0:
            print("  ".join("-" * w for w in widths))


def environment(base_url: str, loaded: list[System]) -> dict[str, Any]:
    from benchmarks.environment import PG_SETTINGS, git_info, machine_info

    with psycopg.connect(base_url, autocommit=True) as conn:
        row = conn.execute("SELECT current_setting('server_version')").fetchone()
        settings = {
            name: f"{setting}{'' if unit is None else ' ' + unit}"
            for name, setting, unit in conn.execute(
                "SELECT name, setting, unit FROM pg_settings WHERE name = ANY (%s)",
                [list(PG_SETTINGS)],
            )
        }
    return {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "git": git_info(),
        "machine": machine_info(),
        "postgres": {"server_version": row[0] if row else None, "settings": settings},
        "python": sys.version.split()[0],
        "versions": {s.name: s.versions() for s in loaded},
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    base_url = os.environ.get("DATABASE_URL")
    if not base_url:
        print("DATABASE_URL is not set (make bench starts a throwaway server)", file=sys.stderr)
        return 2
    loaded: list[System] = []
    for name in args.systems:
        try:
            loaded.append(systems.load(name))
        except ImportError as exc:
            print(f"{name}: not installed ({exc}); pip install -e '.[bench]'", file=sys.stderr)
            return 2
    dbs = Databases(base_url, args.db_prefix)
    env = environment(base_url, loaded)
    print(f"PostgreSQL {env['postgres']['server_version']}; versions {env['versions']}", flush=True)
    for s in loaded:
        print(f"installing {s.name} into {dbs.name(s, template=True)}", flush=True)
        dbs.install_template(s)
    measurements = build(args, dbs, loaded)
    try:
        for rep in range(1, args.reps + 1):
            for m in run_order(measurements):
                if m.once and rep > 1:
                    continue
                sample = m.run()
                m.samples.append(sample)
                value = sample.get(m.metric)
                flag = (
                    ""
                    if not sample["problems"]
                    else "  PROBLEMS: " + "; ".join(p[:300] for p in sample["problems"])
                )
                print(
                    f"[rep {rep}/{args.reps}] {m.system}: {m.label}: {m.metric}={value:,.1f}{flag}",
                    flush=True,
                )
    finally:
        if not args.keep_databases:
            for s in loaded:
                dbs.drop_all(s)
    print()
    print_table(measurements, args.reps)
    env["machine"]["loadavg_at_end"] = list(os.getloadavg())
    results = {
        "benchmark": "sidebyside",
        "environment": env,
        "parameters": {k: v for k, v in vars(args).items() if k not in ("output",)},
        "measurements": {
            m.key: {
                "system": m.system,
                "workload": m.workload,
                "label": m.label,
                "metric": m.metric,
                "summary": m.summary(),
                "samples": m.samples,
            }
            for m in measurements
        },
    }
    output = args.output or RESULTS_DIR / f"sbs-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(f"\nresults written to {output}")
    failed = [m.key for m in measurements if any(s["problems"] for s in m.samples)]
    if failed:
        print(f"correctness problems in: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
