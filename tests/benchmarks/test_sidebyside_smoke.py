"""Smoke test of the side-by-side benchmark harness: every system, every workload it takes part
in (django-tasks-db: the task drain only), tiny sizes.

Not a benchmark (CI's numbers would mean nothing): it keeps the harness, the four system
adapters and the plotting step from rotting. The peers come with the ``bench`` extra, which
``make test`` installs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.sidebyside import systems
from benchmarks.sidebyside.run import Measurement, parse_args, run_order
from benchmarks.sidebyside.systems.base import TASK_MODES

pytestmark = pytest.mark.benchmark_smoke

REPO_ROOT = Path(__file__).resolve().parents[2]
JOBS = 24


# The peer whose own worker may crash when stopped (see the test).
PEER_FLAKY = "django_tasks_db."


def test_every_system_runs_every_workload_exactly_once(tmp_path: Path) -> None:
    output = tmp_path / "results.json"
    url = os.environ["DATABASE_URL"]
    prefix = url.rsplit("/", 1)[1].split("?")[0] + "_smoke"
    argv = [
        sys.executable, "-m", "benchmarks.sidebyside",
        "--jobs", str(JOBS), "--reps", "1", "--concurrency", "4",
        "--latency-count", "5", "--django-requests", "8",
        "--soak-seconds", "2", "--soak-rate", "50", "--soak-sample", "1",
        "--scale-processes", "2", "--scale-concurrency", "4", "--tasks-concurrency", "2",
        "--db-prefix", prefix, "--output", str(output),
    ]  # fmt: skip
    done = subprocess.run(
        argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900, check=False
    )
    assert output.exists(), done.stdout[-4000:] + done.stderr[-4000:]
    results = json.loads(output.read_text())
    # django-tasks-db's own db_worker sometimes dies as it is stopped ("can't change
    # 'autocommit' now", docs/benchmarks.md): the harness reports it as that system's problem
    # and exits 1. Any other system's problem fails the smoke.
    problems = {
        key: m["samples"][0]["problems"]
        for key, m in results["measurements"].items()
        if m["samples"][0]["problems"]
    }
    ours = {key: found for key, found in problems.items() if not key.startswith(PEER_FLAKY)}
    assert ours == {}, done.stdout[-4000:] + done.stderr[-4000:]
    assert done.returncode == (1 if problems else 0), done.stderr[-4000:]

    assert set(results["environment"]["versions"]) == set(systems.MODULES)
    assert all(
        "not installed" not in v
        for vs in results["environment"]["versions"].values()
        for v in vs.values()
    )
    measurements = results["measurements"]
    task_drains = {f"tasks_{mode}_c2" for mode in TASK_MODES}
    for name in systems.MODULES:
        keys = {k.split(".", 1)[1] for k in measurements if k.startswith(name + ".")}
        expected = {
            "enqueue_bulk", "enqueue_single", "drain_async_c4", "latency", "django",
            "scaleout_p2", "soak",
        }  # fmt: skip
        if name == "awa_django":
            expected |= {"drain_sync_c4", "tasks_sync_c2", "tasks_async_c2"} | task_drains
        if name == "django_tasks_db":
            expected = task_drains
        assert keys == expected, name
    for key, m in measurements.items():
        (sample,) = m["samples"]
        assert sample["problems"] == [] or key.startswith(PEER_FLAKY), key
        if m["workload"] in ("drain", "scaleout", "tasks"):
            assert sample["duplicates"] == 0, key
            assert sample["jobs_per_s"] > 0, key
            assert sample["peak_rss_mb"] > 10, key
            # The worker's own CPU is read per process, to the nanosecond; the machine's in
            # clock ticks, which a drain of a few dozen jobs may not even span.
            assert sample["worker_cpu_us_per_job"] > 0, key
            assert sample["machine_cpu_us_per_job"] >= 0, key
            assert sample["machine_busy_share"] >= 0, key
        if m["workload"] == "latency":
            assert 0 < sample["p50_ms"] <= sample["p95_ms"] <= sample["p99_ms"], key
        if m["workload"] == "soak":
            assert sample["samples"], key
            assert all(p["dead_tuples"] >= 0 for p in sample["samples"]), key
            assert sample["enqueued"] > 0, key
    assert measurements["awa_django.scaleout_p2"]["samples"][0]["processes"] == 2

    charts = tmp_path / "charts"
    plotted = subprocess.run(
        [sys.executable, "-m", "benchmarks.sidebyside.plot", str(output), "--out", str(charts),
         "--markdown"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert plotted.returncode == 0, plotted.stderr
    table = [line for line in plotted.stdout.splitlines() if line.startswith("|")]
    assert table[0] == (
        "| measurement | awa_django | awa_pg | procrastinate | pgqueuer | django_tasks_db |"
    )
    assert any(line.startswith("| pickup latency") for line in table)
    svgs = sorted(p.name for p in charts.glob("*.svg"))
    assert svgs == [
        "bench-drain.svg", "bench-enqueue.svg", "bench-latency.svg", "bench-scaleout.svg",
        "bench-soak.svg",
    ]  # fmt: skip
    assert all((charts / s).read_text().lstrip().startswith("<?xml") for s in svgs)


@pytest.mark.parametrize(
    ("argv", "option"),
    [(["--jobs", "0"], "--jobs"), (["--concurrency", "8", "0"], "--concurrency")],
)
def test_bad_sizes_are_rejected_naming_the_option(
    argv: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert f"{option} must be positive" in capsys.readouterr().err


def test_each_workload_runs_on_every_system_back_to_back() -> None:
    def measurement(system: str, key: str) -> Measurement:
        return Measurement(f"{system}.{key}", system, key, key, dict)

    built = [
        measurement("awa_django", "enqueue_bulk"),
        measurement("awa_django", "drain_async_c8"),
        measurement("awa_django", "drain_sync_c8"),
        measurement("pgqueuer", "enqueue_bulk"),
        measurement("pgqueuer", "drain_async_c8"),
    ]
    assert [m.key for m in run_order(built)] == [
        "awa_django.enqueue_bulk",
        "pgqueuer.enqueue_bulk",
        "awa_django.drain_async_c8",
        "pgqueuer.drain_async_c8",
        "awa_django.drain_sync_c8",
    ]
