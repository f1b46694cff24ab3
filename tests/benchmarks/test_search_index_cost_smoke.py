"""Smoke test of the search indexes' cost harness (benchmarks/search_index_cost.py) at a tiny
size, on a throwaway server of its own (it needs pg_stat_statements preloaded). Not a
benchmark: it keeps the harness from rotting."""

from __future__ import annotations

import pytest

from benchmarks.search_index_cost import VARIANTS
from tests.benchmarks.own_server import run_on_own_server

pytestmark = pytest.mark.benchmark_smoke


def test_every_variant_is_counted() -> None:
    done = run_on_own_server(
        "benchmarks.search_index_cost", "--batches", "2", "--batch", "50",
        options="-c autovacuum=off -c shared_preload_libraries=pg_stat_statements",
    )  # fmt: skip
    for name in VARIANTS:
        assert f"== {name}: 100 jobs" in done.stdout, name
    # Three measured steps per variant, each having written WAL except a merge of nothing.
    assert done.stdout.count("   enqueue ") == len(VARIANTS)
    assert done.stdout.count("   drain ") == len(VARIANTS)
    assert "per job: wal_bytes 0.00" not in done.stdout.split("pending-list merge")[0]
