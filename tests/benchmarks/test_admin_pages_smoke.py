"""Smoke test of the admin pages' benchmark (benchmarks/admin_pages.py) at a tiny size, on a
throwaway server of its own (it empties the awa tables of its database). Not a benchmark: it
keeps the harness, and the shape of #36's production history, from rotting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.benchmark_smoke

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_every_state_is_built_and_every_page_answers(tmp_path: Path) -> None:
    output = tmp_path / "admin.json"
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    argv = [
        sys.executable, "scripts/with_postgres.py", "--",
        sys.executable, "-m", "benchmarks.admin_pages", "--jobs", "4000", "--hot-lane", "400",
        "--dead-letters", "200", "--reps", "1", "--no-plans", "--output", str(output),
    ]  # fmt: skip
    done = subprocess.run(
        argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    report = json.loads(output.read_text())
    totals = report["totals"]
    assert all(totals[state] for state in totals if state != "held"), totals
    # Half of --jobs completed by the history builder, the hot lane's jobs, and the runs of
    # the workflows' steps and the cron fires.
    assert totals["completed"] >= 2_000 + 400
    # The DLQ's half that went through the ring (a fifth of it purged) and the half inserted.
    assert totals["dlq"] == 200 - 100 // 5
    assert {page["status"] for page in report["pages"]} <= {200, 302}
    assert report["listings"]
