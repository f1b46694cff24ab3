"""Running a benchmark harness on a throwaway server of its own, for the smoke tests of the
harnesses that need server options of their own (``pg_stat_statements`` preloaded)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_on_own_server(module: str, *args: str, options: str) -> subprocess.CompletedProcess[str]:
    """``python -m module args`` under ``scripts/with_postgres.py`` with ``options`` (as
    ``WITH_POSTGRES_OPTIONS``), whatever ``DATABASE_URL`` the tests have; it must succeed."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["WITH_POSTGRES_OPTIONS"] = options
    argv = [sys.executable, "scripts/with_postgres.py", "--", sys.executable, "-m", module, *args]
    done = subprocess.run(
        argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return done
