"""Smoke test of benchmarks/bulk_profile.py at a tiny size, on a throwaway server of its own
(it needs pg_stat_statements preloaded, tracking nested statements). Not a benchmark: it keeps
the harness from rotting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmarks.own_server import run_on_own_server

pytestmark = pytest.mark.benchmark_smoke


def test_a_bulk_enqueue_is_counted_against_a_bare_copy(tmp_path: Path) -> None:
    output = tmp_path / "bulk-profile.json"
    run_on_own_server(
        "benchmarks.bulk_profile", "--jobs", "50", "--calls", "2", "--output", str(output),
        options="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all",
    )  # fmt: skip
    report = json.loads(output.read_text())
    bulk, floor = report["enqueue_many"], report["bare COPY"]
    # A call: BEGIN, the reservation, the COPY, the commit's publication, COMMIT; the floor's
    # BEGIN, COPY, COMMIT.
    assert bulk["statements"] * 50 == 5.0
    assert floor["statements"] * 50 == 3.0
    # The WAL records by kind, when the WAL can be read on this machine: the index entries.
    for figures in (bulk, floor):
        assert not figures["wal_by_kind"] or figures["wal_by_kind"]["Btree/INSERT_LEAF"] > 0
    assert 0 < floor["python_calls"] <= bulk["python_calls"]
