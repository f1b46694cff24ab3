"""Smoke test of the exact-JSON benchmark (benchmarks/json_storage.py) at a tiny size. Not a
benchmark: it keeps the harness, and its loading of the 0.1.0 check from the released wheel,
from rotting."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.json_storage import COLUMN_TYPES, SHAPES

pytestmark = pytest.mark.benchmark_smoke

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_every_variant_is_measured(tmp_path: Path) -> None:
    output = tmp_path / "json-storage.json"
    argv = [
        sys.executable, "-m", "benchmarks.json_storage",
        "--reps", "2", "--rows", "50", "--calls", "20", "--output", str(output),
    ]  # fmt: skip
    done = subprocess.run(
        argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    results = json.loads(output.read_text())
    check = results["check_us_per_call"]
    assert set(check) == set(SHAPES)
    for variants in check.values():
        assert set(variants) == {"ceiling (encoder only)", "0.1.0", "this checkout"}
        assert all(len(samples) == 2 for samples in variants.values())
    for step in ("copy in", "copy out"):
        assert set(results["storage_ms"][step]) == set(COLUMN_TYPES)
