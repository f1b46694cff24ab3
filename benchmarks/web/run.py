"""Run the web-shaped workload on every system, interleaved, and print the table.

    python -m benchmarks.web [--systems ...] [--threads 1 8 32] [--work-ms 0 5 50]
                             [--variants one two double] [--connections kept per-request]
                             [--seconds 8] [--reps 3] [--output PATH]

The server comes from ``DATABASE_URL`` (``make bench-web`` starts a durable throwaway
cluster). Each system is installed once into a template database; every measurement starts
from a fresh copy of it and runs in its own client process. One repetition runs every cell
(threads x work x variant x connections) on every system back to back before the next cell,
so a slow stretch of the shared machine falls on all systems of a cell alike; the table gives the
median of the repetitions. The exit status is 1 when a measurement failed to run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.sidebyside.databases import Databases
from benchmarks.web import CONNECTIONS, VARIANT_LABELS, VARIANTS
from benchmarks.web.systems import PROTOTYPE_SYSTEMS, SYSTEMS, WebSystem

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"
CEILING = "none"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.web",
        description="Concurrent Django requests that enqueue inside their transaction.",
    )
    add = parser.add_argument
    add(
        "--systems",
        nargs="+",
        choices=[*SYSTEMS, *PROTOTYPE_SYSTEMS],
        default=list(SYSTEMS),
        help="default: every system; the proto_* designs run only when named",
    )
    add("--threads", type=int, nargs="+", default=[1, 8, 32])
    add("--work-ms", type=float, nargs="+", default=[0.0, 5.0, 50.0])
    add("--variants", nargs="+", choices=VARIANTS, default=["one", "two"])
    add(
        "--connections",
        nargs="+",
        choices=CONNECTIONS,
        default=["kept"],
        help="per-request: a new connection each request, as CONN_MAX_AGE = 0",
    )
    add("--seconds", type=float, default=8.0, help="measured time per run")
    add("--warmup", type=float, default=1.0, help="unmeasured time before it")
    add("--reps", type=int, default=3)
    add("--output", type=Path, default=None, help="default: benchmarks/results/web-<time>.json")
    add("--db-prefix", default=None)
    args = parser.parse_args(argv)
    if min(args.threads) < 1 or args.reps < 1 or args.seconds <= 0:
        parser.error("--threads, --reps and --seconds must be positive")
    return args


def _server_settings(url: str) -> dict[str, str]:
    import psycopg

    names = (
        "fsync",
        "synchronous_commit",
        "full_page_writes",
        "server_version",
        "max_connections",
        "shared_buffers",
    )
    with psycopg.connect(url, autocommit=True) as conn:
        return {name: str(conn.execute(f"SHOW {name}").fetchone()[0]) for name in names}


def _git_commit() -> str:
    result = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    return result.stdout.strip()


def run_one(
    url: str, system: WebSystem, cell: dict[str, Any], args: argparse.Namespace, seed: int
) -> dict[str, Any]:
    command = [
        sys.executable,
        "-m",
        "benchmarks.web.client",
        "--system",
        system.name,
        "--url",
        url,
        "--threads",
        str(cell["threads"]),
        "--work-ms",
        str(cell["work_ms"]),
        "--variant",
        cell["variant"],
        "--connections",
        cell["connections"],
        "--seconds",
        str(args.seconds),
        "--warmup",
        str(args.warmup),
        "--seed",
        str(seed),
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        return {"system": system.name, **cell, "failed": result.stderr[-2000:]}
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarise(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (cell, system): medians of the repetitions, deadlocks summed."""
    rows: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for s in samples:
        if "failed" in s:
            continue
        key = (s["threads"], s["work_ms"], s["variant"], s["connections"], s["system"])
        rows.setdefault(key, []).append(s)
    out = []
    for (threads, work_ms, variant, connections, system), runs in sorted(rows.items()):
        waits: dict[str, list[float]] = {}
        for run in runs:
            for event, mean in run["lock_waits"].items():
                waits.setdefault(event, []).append(mean)
        out.append(
            {
                "threads": threads,
                "work_ms": work_ms,
                "variant": variant,
                "connections": connections,
                "system": system,
                "reps": len(runs),
                "requests_per_s": _median([r["requests_per_s"] for r in runs]),
                "p50_ms": _median([r["p50_ms"] for r in runs]),
                "p99_ms": _median([r["p99_ms"] for r in runs]),
                "deadlocks": sum(r["deadlocks"] for r in runs),
                "errors": sum(r["errors"] for r in runs),
                "requests": sum(r["requests"] for r in runs),
                "lock_waits": {e: sum(v) / len(runs) for e, v in sorted(waits.items())},
            }
        )
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    def cell(r: dict[str, Any]) -> tuple[Any, ...]:
        return (r["threads"], r["work_ms"], r["variant"], r["connections"])

    ceilings = {cell(r): r for r in rows if r["system"] == CEILING}
    lines = [
        "| T | W ms | queues | connections | system | requests/s | x ceiling | p50 ms | p99 ms | "
        "p99 x ceiling | lock waits (mean backends) | deadlocks / errors |",
        "|---:|---:|---|---|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        ceiling = ceilings.get(cell(r))

        def ratio(key: str, r: dict[str, Any] = r, ceiling: Any = ceiling) -> str:
            if ceiling is None or not ceiling[key] or r[key] is None:
                return ""
            return f"{r[key] / ceiling[key]:.2f}"

        def ms(key: str, r: dict[str, Any] = r) -> str:
            return "" if r[key] is None else f"{r[key]:.1f}"

        waits = ", ".join(f"{e} {m:.2f}" for e, m in r["lock_waits"].items() if m >= 0.005)
        lines.append(
            f"| {r['threads']} | {r['work_ms']:g} | {VARIANT_LABELS[r['variant']]} | "
            f"{r['connections']} | {r['system']} | {r['requests_per_s']:,.0f} | "
            f"{ratio('requests_per_s')} | "
            f"{ms('p50_ms')} | {ms('p99_ms')} | {ratio('p99_ms')} | {waits or '0'} | "
            f"{r['deadlocks']} / {r['errors']} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    base_url = os.environ.get("DATABASE_URL")
    if not base_url:
        print("DATABASE_URL must name the server (make bench-web starts one)", file=sys.stderr)
        return 2
    dbs = Databases(base_url, prefix=args.db_prefix)
    chosen = [{**SYSTEMS, **PROTOTYPE_SYSTEMS}[name] for name in args.systems]
    for system in chosen:
        print(f"installing {system.name}", flush=True)
        dbs.install_template(system)
    cells = [
        {"threads": t, "work_ms": w, "variant": v, "connections": c}
        for c in args.connections
        for v in args.variants
        for w in args.work_ms
        for t in args.threads
    ]
    samples: list[dict[str, Any]] = []
    failed = False
    for rep in range(args.reps):
        for cell in cells:
            for system in chosen:
                sample = run_one(dbs.fresh(system), system, cell, args, seed=rep + 1)
                sample["rep"] = rep
                samples.append(sample)
                failed = failed or "failed" in sample
                shown = {
                    k: sample.get(k)
                    for k in ("requests_per_s", "p50_ms", "p99_ms", "deadlocks", "errors", "failed")
                }
                print(f"rep {rep + 1} {cell} {system.name}: {shown}", flush=True)
    for system in chosen:
        dbs.drop_all(system)
    rows = summarise(samples)
    table = markdown(rows)
    print(table)
    output = args.output or RESULTS_DIR / f"web-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(
        json.dumps(
            {
                "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                "started": datetime.now(UTC).isoformat(),
                "commit": _git_commit(),
                "server": _server_settings(base_url),
                "machine": {
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "platform": platform.platform(),
                },
                "versions": {s.name: s.versions() for s in chosen},
                "samples": samples,
                "summary": rows,
                "table": table,
            },
            indent=1,
        )
    )
    print(f"results: {output}")
    return 1 if failed else 0
