"""Runs a benchmark harness at a smoke test's size, as a user runs it: ``python -m
benchmarks.<name>`` in the repository, against the test database."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import subprocess_database_url

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_harness(module: str, *args: str, timeout_s: float = 600) -> str:
    """``benchmarks.<module>`` run with ``args``; its output, once it exited 0."""
    env = {
        **os.environ,
        "DATABASE_URL": subprocess_database_url(),
        "DJANGO_SETTINGS_MODULE": "benchmarks.settings",
    }
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *args],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout_s, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return done.stdout
