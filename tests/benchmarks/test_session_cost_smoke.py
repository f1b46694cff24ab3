"""Smoke test of benchmarks/session_cost.py at a tiny size. Not a benchmark: it keeps the
harness from rotting (the backend CPU it reads needs the test server on this machine)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.benchmark_smoke

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_first_and_later_enqueues_are_measured() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.session_cost", "--sessions", "2"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["sessions"] == 2
    assert len(report["awa_django"]["statement_and_commit_ms"]) == 3
    assert len(report["bare_insert"]["statement_and_commit_ms"]) == 2
    assert all(ms > 0 for ms in report["awa_django"]["statement_and_commit_ms"])
