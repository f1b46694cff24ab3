"""Smoke test of benchmarks/enqueue_profile.py at a tiny size, on a throwaway server of its own
(it needs pg_stat_statements preloaded, tracking nested statements). Not a benchmark: it keeps
the harness from rotting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmarks.own_server import run_on_own_server

pytestmark = pytest.mark.benchmark_smoke


def test_an_enqueue_is_counted_in_every_mode(tmp_path: Path) -> None:
    output = tmp_path / "enqueue-profile.json"
    run_on_own_server(
        "benchmarks.enqueue_profile", "--jobs", "20", "--output", str(output),
        options="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all",
    )  # fmt: skip
    report = json.loads(output.read_text())
    alone, atomic = report["autocommit"], report["in a transaction"]
    # One statement per autocommit enqueue; BEGIN, the call, the commit's publication, COMMIT.
    assert alone["statements"] == 1.0
    assert atomic["statements"] == 4.0
    assert alone["nested_statements"] > 0 and atomic["nested_statements"] > 0
    assert alone["python_calls"] > 0 and alone["wal_bytes"] > 0
    # BEGIN, two calls, one publication for both queues' lanes (#32), COMMIT.
    assert report["two queues in a transaction"]["statements"] == 5.0


def test_compare_prints_each_sides_times_per_mode() -> None:
    done = run_on_own_server(
        "benchmarks.enqueue_profile",
        "--compare", "0036_bulk_cost", "--jobs", "10", "--rounds", "1",
        options="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
        " -c pg_stat_statements.track_planning=on",
    )  # fmt: skip
    # Each mode, each side, and the statements of each: the autocommit call, and the commit's
    # publication (a top-level statement) in a transaction.
    assert done.stdout.count("top-level exec") == 6, done.stdout
    assert done.stdout.count("As enqueue_job, for a statement that is its whole") == 2, done.stdout
    assert done.stdout.count("INSERT INTO awa.lane_commits") >= 4, done.stdout
