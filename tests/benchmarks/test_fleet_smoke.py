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
        "--queue-counts", "1", "2", "--jobs", "300", "--idle-seconds", "2", "--idle-warmup", "1",
        "--drain-timeout", "120", "--sample-interval", "0.1", "--output", str(output),
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
    # The server alone, measured before any worker starts, and the fleet's share over it.
    assert results["server_alone"]["server_cpu_share_of_a_core"] is not None
    assert results["server_alone"]["warmup_s"] == 1
    for cell in results["cells"]:
        # Three connections per worker process (a pool of two and the session), whatever the
        # number of queues.
        assert cell["connections"].get("awa_worker", 0) == 6
        assert cell["connections"].get("awa_worker_session", 0) == 3
        assert cell["idle"]["transactions_per_s"] > 0
        assert cell["idle"]["server_cpu_share_of_a_core"] is not None
        assert cell["idle"]["warmup_s"] == 1
        # The server's CPU split by connection kind (#37): the three sessions, the leader's
        # among them, and the six pooled connections, besides the server's own processes.
        kinds = cell["idle"]["server_cpu"]["by_kind"]
        sessions = [kind for kind in kinds if kind.startswith("session")]
        assert sum(kinds[kind]["processes"] for kind in sessions) == 3, kinds
        assert any("leader" in kind for kind in sessions), kinds
        assert kinds["pool"]["processes"] == 6, kinds
        assert all(v["cpu_ms_per_s"] >= 0 and v["wakeups_per_s"] >= 0 for v in kinds.values())
        assert cell["idle"]["fleet_cpu_share_of_a_core"] == pytest.approx(
            cell["idle"]["server_cpu_share_of_a_core"]
            - results["server_alone"]["server_cpu_share_of_a_core"]
        )
        assert 0 < cell["failover"]["seconds"] < 30, cell["failover"]
        assert cell["drain_fleet_s"] > 0 and cell["drain_single_s"] > 0
        for drained in (cell["drain_fleet"], cell["drain_single"]):
            assert drained["done"] == 300 and not drained["timed_out"], drained
            assert drained["progress"][-1][1] == 300
            assert drained["workers_cpu_share_of_a_core"] > 0
            assert 0 < drained["machine_cpu_busy"] <= 1
            # The workers' backends, sampled while they drained.
            assert any(key.startswith("awa_worker") for key in drained["waits"]), drained
            # Per job: transactions, and wake-ups of the workers and of the server (#37).
            assert drained["transactions_per_job"] > 0, drained
            assert drained["worker_wakeups_per_job"] > 0, drained
            assert drained["server_wakeups_per_job"] > 0, drained
        # The failover killed the leader: its two survivors drain.
        assert len(cell["drain_fleet"]["per_worker_cpu_share"]) == 2


@pytest.mark.usefixtures("awa_db")
def test_a_drain_that_runs_out_of_time_says_how_far_it_got(tmp_path: Path) -> None:
    output = tmp_path / "fleet.json"
    argv = [
        sys.executable, "-m", "benchmarks.fleet", "--workers", "1", "--concurrency", "1",
        "--queue-counts", "1", "--jobs", "40", "--job-ms", "100", "--drain-timeout", "1",
        "--parts", "drain", "--output", str(output),
        "--profile-worker", str(tmp_path / "profile"),
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
    (cell,) = json.loads(output.read_text())["cells"]
    drained = cell["drain_fleet"]
    # 40 jobs of 100 ms one at a time take 4 s: the drain stops at its timeout instead.
    assert drained["timed_out"] and 0 < drained["done"] < 40, drained
    assert drained["seconds"] < 10
    assert "idle" not in cell and "failover" not in cell and "drain_single" not in cell
    # The worker ran under cProfile: the jobs it started, and its calls per job.
    profiled = cell["profiled_worker"]
    assert profiled["jobs"] >= drained["done"], profiled
    assert profiled["per_job_code_calls_per_job"] > 0, profiled
