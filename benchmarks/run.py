"""Run every benchmark, print a table and write the results as JSON.

Usage (``make bench`` wraps it in a throwaway PostgreSQL cluster)::

    python -m benchmarks.run [--jobs 20000] [--single-jobs 5000] [--reps 3]
                             [--concurrency 8 32] [--only copy single drain] [--output PATH]

The database comes from ``DATABASE_URL``; it is migrated first, and its awa tables are emptied
before every repetition. Repetitions are interleaved (every measurement once, then again) so
that a burst of noise from other tenants of a shared machine is spread over all measurements
instead of landing on one. The exit status is 1 if any run found a correctness problem.
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

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run", description="Run the awa_django benchmarks."
    )
    parser.add_argument(
        "--jobs", type=int, default=20_000, help="jobs per COPY enqueue and per drain"
    )
    parser.add_argument(
        "--single-jobs", type=int, default=5_000, help="jobs in the single-enqueue loop"
    )
    parser.add_argument("--reps", type=int, default=3, help="repetitions of each measurement")
    parser.add_argument(
        "--concurrency",
        type=int,
        nargs="+",
        default=[8, 32],
        help="worker concurrencies to drain with",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=("copy", "single", "drain"),
        default=["copy", "single", "drain"],
        help="run only these measurements",
    )
    parser.add_argument(
        "--no-warmup",
        action="store_true",
        help="skip the statistics warm-up (planner statistics then depend on autovacuum timing)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="results file (default: benchmarks/results/<UTC time>-<commit>.json)",
    )
    args = parser.parse_args(argv)
    if min(args.jobs, args.single_jobs, args.reps, *args.concurrency) < 1:
        parser.error("--jobs, --single-jobs, --reps and --concurrency must be positive")
    return args


@dataclass
class Measurement:
    """One row of the table: a named benchmark and its repetitions."""

    key: str
    label: str
    run: Callable[[], Any]
    samples: list[Any] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        rates = [s.jobs_per_s for s in self.samples if not math.isnan(s.jobs_per_s)]
        if not rates:
            return {"median": None, "min": None, "max": None}
        return {"median": statistics.median(rates), "min": min(rates), "max": max(rates)}


def build_measurements(args: argparse.Namespace) -> list[Measurement]:
    from benchmarks import scenarios
    from benchmarks.jobs import ASYNC_KIND, SYNC_KIND

    found: list[Measurement] = []
    if "copy" in args.only:
        found.append(
            Measurement(
                "copy_enqueue",
                f"enqueue_many: {args.jobs} jobs, one COPY call",
                lambda: scenarios.measure_copy_enqueue(args.jobs, SYNC_KIND),
            )
        )
    if "single" in args.only:
        found.append(
            Measurement(
                "single_enqueue",
                f"enqueue: {args.single_jobs} jobs, a commit each",
                lambda: scenarios.measure_single_enqueue(args.single_jobs, SYNC_KIND),
            )
        )
    if "drain" in args.only:
        for mode, kind in (("sync", SYNC_KIND), ("async", ASYNC_KIND)):
            for concurrency in args.concurrency:
                found.append(
                    Measurement(
                        f"drain_{mode}_c{concurrency}",
                        f"drain {args.jobs} no-op {mode} jobs, concurrency {concurrency}",
                        # Default arguments bind this iteration's values, not the last ones.
                        lambda kind=kind, c=concurrency: scenarios.measure_drain(
                            args.jobs, kind, c
                        ),
                    )
                )
    return found


def _fmt_rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _notes(measurement: Measurement) -> str:
    if not measurement.key.startswith("drain_"):
        return ""
    extras = [s.extra for s in measurement.samples]
    claim = statistics.median(e["claims"]["mean_jobs"] or 0 for e in extras)
    done = statistics.median(e["completions"]["mean_jobs"] or 0 for e in extras)
    process = statistics.median(e["process_s"] for e in extras)
    busy = [e["machine_cpu_busy"] for e in extras if e.get("machine_cpu_busy") is not None]
    cpu = f", CPUs {statistics.median(busy):.0%} busy" if busy else ""
    return f"{claim:.1f} jobs/claim, {done:.1f} jobs/completion stmt, process {process:.1f}s{cpu}"


def print_table(measurements: list[Measurement], reps: int) -> None:
    header = ("measurement", f"jobs/s median of {reps}", "min-max", "notes (medians)")
    rows = []
    for m in measurements:
        s = m.summary()
        rows.append(
            (
                m.label,
                _fmt_rate(s["median"]),
                f"{_fmt_rate(s['min'])}-{_fmt_rate(s['max'])}",
                _notes(m),
            )
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    for i, row in enumerate([header, *rows]):
        print(f"{row[0]:<{widths[0]}}  {row[1]:>{widths[1]}}  {row[2]:>{widths[2]}}  {row[3]}")
        if i == 0:
            print("  ".join("-" * w for w in widths))


def sample_record(sample: Any) -> dict[str, Any]:
    return {
        "jobs": sample.jobs,
        "seconds": sample.seconds,
        "jobs_per_s": sample.jobs_per_s,
        "extra": sample.extra,
        "problems": sample.problems,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from benchmarks import environment, scenarios
    from benchmarks.jobs import SYNC_KIND

    call_command("migrate", verbosity=0, interactive=False)
    env = environment.collect()
    pg = env["postgres"]
    print(
        f"PostgreSQL {pg['server_version']} at {pg['database']} "
        f"({', '.join(f'{k}={v}' for k, v in pg['settings'].items())}); "
        f"{env['machine']['cpus']} CPUs, {env['machine']['memory_gib']} GiB; "
        f"commit {env['git']['commit'][:10]}",
        flush=True,
    )

    measurements = build_measurements(args)
    if not args.no_warmup:
        print("warm-up: one small drain, then ANALYZE with every awa table populated", flush=True)
        scenarios.warm_statistics(SYNC_KIND)
    for rep in range(1, args.reps + 1):
        for m in measurements:
            sample = m.run()
            m.samples.append(sample)
            flag = "" if not sample.problems else "  PROBLEMS: " + "; ".join(sample.problems)
            print(
                f"[rep {rep}/{args.reps}] {m.label}: {sample.jobs_per_s:,.0f} jobs/s "
                f"({sample.seconds:.3f}s){flag}",
                flush=True,
            )

    print()
    print_table(measurements, args.reps)
    env["machine"]["loadavg_at_end"] = list(os.getloadavg())
    results = {
        "environment": env,
        "parameters": {
            "jobs": args.jobs,
            "single_jobs": args.single_jobs,
            "reps": args.reps,
            "concurrency": args.concurrency,
            "args_bytes": scenarios.ARGS_BYTES,
            "statistics_warmup": not args.no_warmup,
        },
        "measurements": {
            m.key: {
                "label": m.label,
                "jobs_per_s": m.summary(),
                "samples": [sample_record(s) for s in m.samples],
            }
            for m in measurements
        },
    }
    output = args.output
    if output is None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        output = RESULTS_DIR / f"{stamp}-{env['git']['commit'][:10] or 'nogit'}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(f"\nresults written to {output}")
    failed = [m.key for m in measurements if any(s.problems for s in m.samples)]
    if failed:
        print(f"correctness problems in: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
