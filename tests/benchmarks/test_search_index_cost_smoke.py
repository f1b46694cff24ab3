"""Smoke test of the search indexes' cost harness (benchmarks/search_index_cost.py) at a tiny
size, on a throwaway server of its own (it needs pg_stat_statements preloaded). Not a
benchmark: it keeps the harness from rotting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.search_index_cost import VARIANTS

pytestmark = pytest.mark.benchmark_smoke

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_every_variant_is_counted() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["WITH_POSTGRES_OPTIONS"] = (
        "-c autovacuum=off -c shared_preload_libraries=pg_stat_statements"
    )
    argv = [
        sys.executable, "scripts/with_postgres.py", "--",
        sys.executable, "-m", "benchmarks.search_index_cost", "--batches", "2", "--batch", "50",
    ]  # fmt: skip
    done = subprocess.run(
        argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    for name in VARIANTS:
        assert f"== {name}: 100 jobs" in done.stdout, name
    # Three measured steps per variant, each having written WAL except a merge of nothing.
    assert done.stdout.count("   enqueue ") == len(VARIANTS)
    assert done.stdout.count("   drain ") == len(VARIANTS)
    assert "per job: wal_bytes 0.00" not in done.stdout.split("pending-list merge")[0]
