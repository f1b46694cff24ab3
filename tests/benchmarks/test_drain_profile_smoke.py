"""Smoke test of benchmarks/drain_profile.py at a tiny size, on a throwaway server of its own
(it needs pg_stat_statements preloaded). Not a benchmark: it keeps the harness from rotting."""

from __future__ import annotations

import re

import pytest

from tests.benchmarks.own_server import run_on_own_server

pytestmark = pytest.mark.benchmark_smoke


def test_a_drain_is_counted_per_job() -> None:
    # Also by statement, nested ones included, with the functions of an earlier migration (the
    # harness migrates back, drains, and migrates forward again).
    done = run_on_own_server(
        "benchmarks.drain_profile", "--jobs", "200", "--concurrency", "32", "--top", "3",
        "--statements", "--migrate-to", "0036",
        options="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
        " -c pg_stat_statements.track_planning=on",
    )  # fmt: skip
    out = done.stdout
    calls = re.search(r"python function calls per job, event loop's thread: ([\d.]+)", out)
    claims = re.search(r"claims: (\d+), asked for min (\d+)", out)
    statements = re.search(r"statements per job: ([\d.]+)", out)
    assert calls and claims and statements, out
    assert float(calls[1]) > 0
    # 200 jobs at c=32: at least seven claims, and none asks for more than the concurrency.
    assert int(claims[1]) >= 7 and int(claims[2]) <= 32
    assert 0 < float(statements[1]) < 1
    assert "rows a call" in out
    assert re.search(r"during the drain: autovacuums \d+, autoanalyzes \d+, checkpoints \d+", out)
    nested = re.search(r"statements inside functions per job: ([\d.]+)", out)
    assert nested and float(nested[1]) > 0, out
    # A statement inside a function among the top three by execution time.
    assert re.search(r"^ +[\d.]+ +[\d.]+ +[\d.]+ .*  > (WITH|SELECT) ", out, re.MULTILINE), out


def test_a_drain_of_sync_django_tasks_counts_the_handler_threads_calls_too() -> None:
    # The tasks spread over every Django priority, as the side-by-side run's task-*-spread.
    done = run_on_own_server(
        "benchmarks.drain_profile", "--jobs", "402", "--concurrency", "8", "--top", "3",
        "--mode", "sync", "--tasks", "--spread",
        options="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=top",
    )  # fmt: skip
    out = done.stdout
    loop = re.search(r"python function calls per job, event loop's thread: ([\d.]+)", out)
    every = re.search(r"python function calls per job, all threads: ([\d.]+)", out)
    assert loop and every, out
    assert "django.tasks @task spread over 201 priorities sync c=8, 402 jobs" in out, out
    # The tasks run on the handler threads, whose calls only the second count holds.
    assert float(every[1]) > float(loop[1]) > 0
    # The first claim compares lanes by aged priority (the shipped aging interval).
    claims = re.search(
        r"jobs a claim: ([\d.]+), claims per job: [\d.]+, aged claims: (\d+) of", out
    )
    assert claims and 0 < float(claims[1]) <= 8 and int(claims[2]) >= 1, out
