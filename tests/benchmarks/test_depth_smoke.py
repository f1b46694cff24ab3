"""Smoke test of the depth benchmark (benchmarks/depth.py) at a tiny size. Not a benchmark: it
keeps the harness from rotting."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.benchmark_smoke

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_backlogs_and_history_checkpoints_are_measured(tmp_path: Path) -> None:
    output = tmp_path / "depth.json"
    argv = [
        sys.executable, "-m", "benchmarks.depth",
        "--backlogs", "50", "120", "--measure", "40", "--history", "0", "300",
        "--single", "10", "--reps", "1", "--concurrency", "8", "--output", str(output),
    ]  # fmt: skip
    done = subprocess.run(
        argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    report = json.loads(output.read_text())
    assert report["problems"] == []
    assert set(report["backlog_jobs_per_s"]) == {"50", "120"}
    assert set(report["history_jobs_per_s"]) == {"0", "300"}
    for rounds in report["history_jobs_per_s"].values():
        assert all(len(rates) == 1 and rates[0] > 0 for rates in rounds.values())
    assert all(rates[0] > 0 for rates in report["backlog_jobs_per_s"].values())
    # The Jobs page at each checkpoint, its state count the history built (and the round's
    # jobs drained before the next checkpoint).
    pages = report["admin_jobs_page"]
    assert set(pages) == {"0", "300"}
    assert pages["0"]["jobs, state=completed"]["count"] == 0
    assert pages["300"]["jobs, state=completed"]["count"] == 300 + 10 + 40
    assert all(page["median_ms"] > 0 for page in pages["300"].values())
