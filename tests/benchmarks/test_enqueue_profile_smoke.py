"""Smoke test of benchmarks/enqueue_profile.py at a tiny size, on a throwaway server of its own
(it needs pg_stat_statements preloaded, tracking nested statements). Not a benchmark: it keeps
the harness from rotting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.benchmark_smoke

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_an_enqueue_is_counted_in_both_modes(tmp_path: Path) -> None:
    output = tmp_path / "enqueue-profile.json"
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["WITH_POSTGRES_OPTIONS"] = (
        "-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
    )
    argv = [
        sys.executable, "scripts/with_postgres.py", "--",
        sys.executable, "-m", "benchmarks.enqueue_profile", "--jobs", "20",
        "--output", str(output),
    ]  # fmt: skip
    done = subprocess.run(
        argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    report = json.loads(output.read_text())
    alone, atomic = report["autocommit"], report["in a transaction"]
    # One statement per autocommit enqueue; BEGIN, the call, the commit's publication, COMMIT.
    assert alone["statements"] == 1.0
    assert atomic["statements"] == 4.0
    assert alone["nested_statements"] > 0 and atomic["nested_statements"] > 0
    assert alone["python_calls"] > 0 and alone["wal_bytes"] > 0
