"""Smoke test of the workflows benchmark (benchmarks/workflows.py) at a tiny size, without the
peers. Not a benchmark: it keeps the harness from rotting."""

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


@pytest.mark.usefixtures("awa_db")  # the harness empties the awa tables of the test database
def test_the_drain_reports_every_round_and_their_median(tmp_path: Path) -> None:
    output = tmp_path / "workflows.json"
    argv = [
        sys.executable, "-m", "benchmarks.workflows", "--peers", "",
        "--chains", "2", "--chain-length", "2", "--chords", "1", "--chord-size", "3",
        "--groups", "2", "--group-size", "2", "--drain", "20", "--drain-reps", "3",
        "--close-reps", "1", "--concurrency", "2", "--output", str(output),
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
    drain = json.loads(output.read_text())["drain"]
    ratios = [each["ratio"] for each in drain["rounds"]]
    assert len(ratios) == 3
    assert all(each["plain_jobs_per_s"] > 0 and each["steps_per_s"] > 0 for each in drain["rounds"])
    assert sorted(ratios)[1] == drain["ratio"]
    assert (drain["ratio_min"], drain["ratio_max"]) == (min(ratios), max(ratios))
    assert done.stdout.count("drain round ") == 3
