"""Smoke test of the web-shaped producer benchmark (benchmarks/web): every system, both
variants, a fraction of a second each. Not a benchmark: it keeps the harness, its client
processes and the five systems' request paths from rotting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.web.systems import SYSTEMS

pytestmark = pytest.mark.benchmark_smoke

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_every_system_serves_every_variant(tmp_path: Path) -> None:
    output = tmp_path / "web.json"
    url = os.environ["DATABASE_URL"]
    prefix = url.rsplit("/", 1)[1].split("?")[0] + "_websmoke"
    argv = [
        sys.executable, "-m", "benchmarks.web",
        "--threads", "2", "--work-ms", "0", "--variants", "one", "two", "double",
        "--seconds", "0.5", "--warmup", "0.2", "--reps", "1",
        "--db-prefix", prefix, "--output", str(output),
    ]  # fmt: skip
    done = subprocess.run(
        argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    results = json.loads(output.read_text())
    rows = {(row["system"], row["variant"]): row for row in results["summary"]}
    assert set(rows) == {(system, v) for system in SYSTEMS for v in ("one", "two", "double")}
    for row in rows.values():
        assert row["requests"] > 0 and row["errors"] == 0 and row["deadlocks"] == 0, row
    assert "| 2 | 0 | 2 | kept | awa_django |" in results["table"]
    assert "| 2 | 0 | 1, 2 jobs | kept | awa_django |" in results["table"]


def test_connections_opened_per_request(tmp_path: Path) -> None:
    """``--connections per-request``: Django's default CONN_MAX_AGE of 0, a new server session
    for every request."""
    output = tmp_path / "web.json"
    url = os.environ["DATABASE_URL"]
    prefix = url.rsplit("/", 1)[1].split("?")[0] + "_websmoke_conn"
    argv = [
        sys.executable, "-m", "benchmarks.web", "--systems", "none", "awa_django", "pgqueuer",
        "bare_row", "--threads", "2", "--work-ms", "0", "--variants", "one",
        "--connections", "per-request", "--seconds", "0.5", "--warmup", "0.2", "--reps", "1",
        "--db-prefix", prefix, "--output", str(output),
    ]  # fmt: skip
    done = subprocess.run(
        argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    results = json.loads(output.read_text())
    rows = {row["system"]: row for row in results["summary"]}
    assert set(rows) == {"none", "awa_django", "pgqueuer", "bare_row"}
    for row in rows.values():
        assert row["connections"] == "per-request"
        assert row["requests"] > 0 and row["errors"] == 0, row
    assert "| 2 | 0 | 1 | per-request | awa_django |" in results["table"]
