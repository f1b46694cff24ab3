"""Smoke test of the priority-lanes claim benchmark (benchmarks/priority_claims.py) at a tiny
size. Not a benchmark: it keeps the harness from rotting."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.priority_claims import AGING, LAYOUTS

pytestmark = pytest.mark.benchmark_smoke

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_every_layout_is_drained_in_both_orders(tmp_path: Path) -> None:
    output = tmp_path / "priority-claims.json"
    argv = [
        sys.executable, "-m", "benchmarks.priority_claims",
        "--jobs", "402", "--reps", "1", "--batch", "50", "--output", str(output),
    ]  # fmt: skip
    done = subprocess.run(
        argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    samples = json.loads(output.read_text())["claimed_jobs_per_s"]
    assert set(samples) == set(LAYOUTS)
    for modes in samples.values():
        assert set(modes) == set(AGING)
        assert all(len(values) == 1 and values[0] > 0 for values in modes.values())
