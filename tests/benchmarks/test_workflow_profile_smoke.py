"""Smoke test of the workflow-step profile (benchmarks/workflow_profile.py) at a tiny size. Not
a benchmark: it keeps the harness from rotting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmarks.harness import run_harness

pytestmark = pytest.mark.benchmark_smoke


@pytest.mark.usefixtures("awa_db")  # the harness empties the awa tables of the test database
def test_the_profile_counts_both_sides(tmp_path: Path) -> None:
    output = tmp_path / "workflow-profile.json"
    run_harness("workflow_profile", "--count", "20", "--top", "5", "--output", str(output))
    results = json.loads(output.read_text())
    producer = results["producer"]
    # At this size one-off work (a lane's creation) outweighs the per-job calls: no order.
    assert producer["steps_calls_per_step"] > 0 and producer["plain_calls_per_job"] > 0
    # Each step's arguments are bound once; its options are not resolved once per step.
    per_step = producer["per_step_functions"]
    assert any(name.endswith("(bind_args)") for name in per_step)
    assert not any(name.endswith("(resolve)") and "enqueue_options" in name for name in per_step)
    assert results["worker"]["steps_calls_per_step"] > 0
