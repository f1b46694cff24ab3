"""Smoke test of the cost budget benchmark (benchmarks/cost_budget.py) at a tiny size, on a
throwaway server of its own (it needs pg_stat_statements preloaded). Not a benchmark: it keeps
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


def test_every_operation_is_measured(tmp_path: Path) -> None:
    output = tmp_path / "cost-budget.json"
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["WITH_POSTGRES_OPTIONS"] = (
        "-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=top"
    )
    argv = [
        sys.executable, "scripts/with_postgres.py", "--",
        sys.executable, "-m", "benchmarks.cost_budget",
        "--jobs", "200", "--reps", "1", "--output", str(output),
    ]  # fmt: skip
    done = subprocess.run(
        argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    summary = json.loads(output.read_text())["summary"]
    assert len(summary) == 11
    for name, figures in summary.items():
        assert figures["jobs_per_s"][0] > 0, name
        # Every operation writes its jobs somewhere, and the drains remove them again.
        assert figures["rows_written"][0] >= 1, name
    assert "| awa_django drain, 201 lanes |" in done.stdout
