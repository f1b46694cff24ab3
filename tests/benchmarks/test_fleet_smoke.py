"""Smoke test of the fleet benchmark (benchmarks/fleet.py) at a tiny size: three workers. Not a
benchmark: it keeps the harness (its fleet, idle window, failover and drains) from rotting."""

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
def test_every_measurement_is_taken(tmp_path: Path) -> None:
    output = tmp_path / "fleet.json"
    argv = [
        sys.executable, "-m", "benchmarks.fleet", "--workers", "3", "--concurrency", "2",
        "--queue-counts", "1", "2", "--jobs", "300", "--idle-seconds", "2",
        "--output", str(output),
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
    assert [cell["queues"] for cell in results["cells"]] == [1, 2]
    for cell in results["cells"]:
        # Three connections per worker process (a pool of two and the session), whatever the
        # number of queues.
        assert cell["connections"].get("awa_worker", 0) == 6
        assert cell["connections"].get("awa_worker_session", 0) == 3
        assert cell["idle"]["transactions_per_s"] > 0
        assert cell["idle"]["server_cpu_share_of_a_core"] is not None
        assert 0 < cell["failover"]["seconds"] < 30, cell["failover"]
        assert cell["drain_fleet_s"] > 0 and cell["drain_single_s"] > 0
