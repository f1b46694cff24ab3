"""What exact JSON round trips cost: the enqueue-time check, and json against jsonb storage.

Usage (a throwaway cluster, as the other harnesses)::

    python3 scripts/with_postgres.py -- .venv/bin/python -m benchmarks.json_storage \
        [--reps 15] [--rows 100000] [--calls 20000] [--output PATH]

Two measurements, each repeated ``--reps`` times with its variants interleaved (every variant
once, then every variant again), reported as the median and range:

- **check**: microseconds of CPU per call of turning one argument dict into the JSON text awa
  stores, for four shapes of arguments: the ceiling (the bare encoder, no check at all), the
  check of the 0.1.0 release (``awa_django/arguments.py`` read from its wheel in
  ``tests/migrations/releases/``) and this checkout's
  ``awa_django.declarations.exact_json.to_json_text``.
- **storage**: ``COPY`` of ``--rows`` rows shaped like ready rows' JSON columns (the arguments of
  the bulk benchmark and empty metadata) into a column of type ``text`` (the ceiling: no parse),
  ``json`` and ``jsonb``, then ``COPY ... TO STDOUT`` of the same columns (what a claim pays to
  emit them), in milliseconds.

Writes every sample and the environment to ``benchmarks/results/json-storage-<UTC time>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import timeit
import types
import zipfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.environment import REPO_ROOT, git_info, machine_info

RELEASED_WHEEL = REPO_ROOT / "tests/migrations/releases/awa_django-0.1.0-py3-none-any.whl"
RESULTS_DIR = Path(__file__).resolve().parent / "results"
# The arguments of the bulk benchmark (benchmarks/run.py): 256 bytes of compact JSON.
FLAT = {"n": 12345, "payload": "ab" * 114}
SHAPES: dict[str, Any] = {
    "flat (bulk benchmark)": FLAT,
    "nested (order lines)": {
        "order_id": 981,
        "lines": [{"sku": f"SKU-{i}", "qty": i, "price": 9.99 + i} for i in range(5)],
        "note": "leave at the door",
    },
    "django.tasks (args/kwargs)": {"args": [42, "welcome"], "kwargs": {"ratio": 0.5}},
    "large floats (written out)": {"n": 1, "total": 1.5e18, "values": [1e16, 2.0e20]},
}
COLUMN_TYPES = ("text", "json", "jsonb")


def released_check() -> Callable[[object], str]:
    """0.1.0's ``to_json_text``, loaded from the released wheel's source."""
    source = zipfile.ZipFile(RELEASED_WHEEL).read("awa_django/arguments.py").decode()
    module = types.ModuleType("awa_django_0_1_0_arguments")
    # Dataclasses look their module up while the class is built.
    sys.modules[module.__name__] = module
    exec(compile(source, "awa_django-0.1.0/arguments.py", "exec"), module.__dict__)
    return lambda value: module.to_json_text(value, what="args")


def measure_check(reps: int, calls: int) -> dict[str, dict[str, list[float]]]:
    from awa_django.declarations.exact_json import _ENCODER, to_json_text

    variants: dict[str, Callable[[object], str]] = {
        "ceiling (encoder only)": _ENCODER.encode,
        "0.1.0": released_check(),
        "this checkout": lambda value: to_json_text(value, field="args"),
    }
    samples: dict[str, dict[str, list[float]]] = {
        shape: {name: [] for name in variants} for shape in SHAPES
    }
    for _ in range(reps):
        for shape, value in SHAPES.items():
            for name, check in variants.items():
                # CPU time of this process: on a shared machine, wall time also counts the
                # other tenants' turns on the CPU.
                seconds = timeit.timeit(
                    lambda: check(value),  # noqa: B023
                    number=calls,
                    timer=time.process_time,
                )
                samples[shape][name].append(seconds / calls * 1e6)
    return samples


def measure_storage(url: str, reps: int, rows: int) -> dict[str, dict[str, list[float]]]:
    args = json.dumps(FLAT, separators=(",", ":"))
    payload = "".join(f"{i}\t{args}\t{{}}\n" for i in range(rows))
    samples: dict[str, dict[str, list[float]]] = {
        step: {kind: [] for kind in COLUMN_TYPES} for step in ("copy in", "copy out")
    }
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS bench_json CASCADE")
        conn.execute("CREATE SCHEMA bench_json")
        for kind in COLUMN_TYPES:
            conn.execute(
                f"CREATE TABLE bench_json.t_{kind} (job_id bigint, args {kind}, metadata {kind})"
            )
        try:
            for _ in range(reps):
                for kind in COLUMN_TYPES:
                    conn.execute(f"TRUNCATE bench_json.t_{kind}")
                    started = time.perf_counter()
                    with conn.cursor().copy(f"COPY bench_json.t_{kind} FROM STDIN") as copy:
                        copy.write(payload)
                    samples["copy in"][kind].append((time.perf_counter() - started) * 1e3)
                for kind in COLUMN_TYPES:
                    started = time.perf_counter()
                    query = f"COPY (SELECT args, metadata FROM bench_json.t_{kind}) TO STDOUT"
                    with conn.cursor().copy(query) as copy:
                        for _block in copy:
                            pass
                    samples["copy out"][kind].append((time.perf_counter() - started) * 1e3)
        finally:
            conn.execute("DROP SCHEMA bench_json CASCADE")
    return samples


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.3g} ({min(values):.3g}-{max(values):.3g})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.json_storage")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--rows", type=int, default=100_000, help="rows per COPY")
    parser.add_argument("--calls", type=int, default=20_000, help="checks per sample")
    parser.add_argument("--output", type=Path, default=None)
    options = parser.parse_args(argv)
    url = os.environ.get("DATABASE_URL")
    if not url:
        print("DATABASE_URL is not set (run under scripts/with_postgres.py)", file=sys.stderr)
        return 2
    started = datetime.now(UTC)
    check = measure_check(options.reps, options.calls)
    storage = measure_storage(url, options.reps, options.rows)
    print(f"check, µs per call, median (min-max) of {options.reps}:")
    for shape, variants in check.items():
        print(f"  {shape}: " + "; ".join(f"{n} {summary(v)}" for n, v in variants.items()))
    print(f"storage, ms per {options.rows:,} rows, median (min-max) of {options.reps}:")
    for step, kinds in storage.items():
        print(f"  {step}: " + "; ".join(f"{k} {summary(v)}" for k, v in kinds.items()))
    with psycopg.connect(url) as conn:
        server = conn.execute("SELECT version()").fetchone()
    output = options.output or RESULTS_DIR / f"json-storage-{started:%Y%m%dT%H%M%SZ}.json"
    output.write_text(
        json.dumps(
            {
                "measured_at": started.isoformat(timespec="seconds"),
                "options": vars(options) | {"output": str(output)},
                "git": git_info(),
                "machine": machine_info(),
                "python": sys.version,
                "psycopg": psycopg.__version__,
                "server": server[0] if server else None,
                "check_us_per_call": check,
                "storage_ms": storage,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
