"""Smoke test of the workflow-step profile (benchmarks/workflow_profile.py) at a tiny size. Not
a benchmark: it keeps the harness from rotting."""

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
def test_the_profile_counts_both_sides(tmp_path: Path) -> None:
    output = tmp_path / "workflow-profile.json"
    argv = [
        sys.executable, "-m", "benchmarks.workflow_profile",
        "--count", "20", "--top", "5", "--output", str(output),
    ]  # fmt: skip
    env = {
        **os.environ,
        "DATABASE_URL": subprocess_database_url(),
        "DJANGO_SETTINGS_MODULE": "benchmarks.settings",
    }
    done = subprocess.run(
        argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    results = json.loads(output.read_text())
    producer = results["producer"]
    # At this size one-off work (a lane's creation) outweighs the per-job calls: no order.
    assert producer["steps_calls_per_step"] > 0 and producer["plain_calls_per_job"] > 0
    # Each step's arguments are bound once; its options are not resolved once per step.
    per_step = producer["per_step_functions"]
    assert any(name.endswith("(bind_arguments)") for name in per_step)
    assert not any(name.endswith("(resolve)") and "enqueue_options" in name for name in per_step)
    assert results["worker"]["steps_calls_per_step"] > 0
