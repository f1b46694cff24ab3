"""Smoke test of the workflows benchmark (benchmarks/workflows.py) at a tiny size, without the
peers. Not a benchmark: it keeps the harness from rotting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmarks.harness import run_harness

pytestmark = pytest.mark.benchmark_smoke


@pytest.mark.usefixtures("awa_db")  # the harness empties the awa tables of the test database
def test_the_drain_reports_every_round_and_their_median(tmp_path: Path) -> None:
    output = tmp_path / "workflows.json"
    printed = run_harness(
        "workflows", "--peers", "",
        "--chains", "2", "--chain-length", "2", "--chords", "1", "--chord-size", "3",
        "--groups", "2", "--group-size", "2", "--drain", "20", "--drain-reps", "3",
        "--close-reps", "1", "--concurrency", "2", "--output", str(output),
        timeout_s=300,
    )  # fmt: skip
    drain = json.loads(output.read_text())["drain"]
    ratios = [each["ratio"] for each in drain["rounds"]]
    assert len(ratios) == 3
    assert all(each["plain_jobs_per_s"] > 0 and each["steps_per_s"] > 0 for each in drain["rounds"])
    assert sorted(ratios)[1] == drain["ratio"]
    assert (drain["ratio_min"], drain["ratio_max"]) == (min(ratios), max(ratios))
    assert printed.count("drain round ") == 3
