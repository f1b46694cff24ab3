"""Smoke test of the cost budget benchmark (benchmarks/cost_budget.py) at a tiny size, on a
throwaway server of its own (it needs pg_stat_statements preloaded). Not a benchmark: it keeps
the harness from rotting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmarks.own_server import run_on_own_server

pytestmark = pytest.mark.benchmark_smoke


def test_every_operation_is_measured(tmp_path: Path) -> None:
    output = tmp_path / "cost-budget.json"
    done = run_on_own_server(
        "benchmarks.cost_budget", "--jobs", "200", "--reps", "1", "--output", str(output),
        options="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=top",
    )  # fmt: skip
    summary = json.loads(output.read_text())["summary"]
    assert len(summary) == 11
    for name, figures in summary.items():
        assert figures["jobs_per_s"][0] > 0, name
        # Every operation writes its jobs somewhere, and the drains remove them again.
        assert figures["rows_written"][0] >= 1, name
    assert "| awa_django drain, 201 lanes |" in done.stdout
