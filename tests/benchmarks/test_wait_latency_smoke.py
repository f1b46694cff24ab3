"""Smoke test of the wait-latency benchmark (benchmarks/wait_latency.py) at a tiny size. Not a
benchmark: it keeps the harness, its worker process and its timed close statements from
rotting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import subprocess_database_url

pytestmark = pytest.mark.benchmark_smoke

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.usefixtures("awa_db")  # the benchmark empties the awa tables of the test database
def test_both_measurements_are_taken(tmp_path: Path) -> None:
    output = tmp_path / "wait-latency.json"
    argv = [
        sys.executable, "-m", "benchmarks.wait_latency",
        "--jobs", "3", "--close-reps", "2", "--output", str(output),
    ]  # fmt: skip
    env = {
        **os.environ,
        "DATABASE_URL": subprocess_database_url(),
        "DJANGO_SETTINGS_MODULE": "benchmarks.settings",
    }
    done = subprocess.run(
        argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    results = json.loads(output.read_text())
    assert len(results["wake_latency_ms"]) + results["ended_before_wait"] == 3
    assert all(0 < latency < 30_000 for latency in results["wake_latency_ms"])
    close = results["close_execution_ms"]
    assert set(close) == {"1 attempts", "100 attempts"}
    for variants in close.values():
        assert {name: len(samples) for name, samples in variants.items()} == {
            "0004 (no check)": 2,
            "this checkout": 2,
        }
