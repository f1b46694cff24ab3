"""Charts of a side-by-side results file, as SVG for docs/benchmarks.md.

    python -m benchmarks.sidebyside.plot RESULTS.json [--out docs/img]

Draws drain throughput against concurrency, enqueue throughput, pickup latency percentiles,
scale-out, and the soak's dead tuples and throughput over time, one line or bar per system;
``--markdown`` also prints the medians as the Markdown table docs/benchmarks.md holds.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "docs" / "img"


def _by_system(results: dict[str, Any], workload: str) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for m in results["measurements"].values():
        if m["workload"] == workload:
            found.setdefault(m["system"], []).append(m)
    return found


def _median(m: dict[str, Any], metric: str) -> float | None:
    values = sorted(s[metric] for s in m["samples"] if isinstance(s.get(metric), int | float))
    return values[len(values) // 2] if values else None


def _save(fig: Any, out: Path, name: str, written: list[Path]) -> None:
    path = out / name
    fig.tight_layout()
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)
    written.append(path)


def drain_chart(results: dict[str, Any], out: Path, written: list[Path]) -> None:
    found = _by_system(results, "drain")
    if not found:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    for system, ms in found.items():
        for mode in ("async", "sync"):
            points = sorted(
                (s["concurrency"], _median(m, "jobs_per_s"))
                for m in ms
                for s in m["samples"][:1]
                if s["mode"] == mode
            )
            if points:
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, marker="o", label=f"{system} ({mode})")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("worker concurrency (one process)")
    ax.set_ylabel("jobs/s (median)")
    ax.set_title("Drain of pre-enqueued no-op jobs")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    _save(fig, out, "bench-drain.svg", written)


def _bars(ax: Any, groups: list[str], series: dict[str, list[float | None]], ylabel: str) -> None:
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        xs = [g + i * width for g in range(len(groups))]
        ax.bar(xs, [v or 0 for v in values], width, label=name)
    ax.set_xticks([g + width * (len(series) - 1) / 2 for g in range(len(groups))], groups)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3, axis="y")


def enqueue_chart(results: dict[str, Any], out: Path, written: list[Path]) -> None:
    found = _by_system(results, "enqueue")
    if not found:
        return
    groups = ["bulk", "single (commit each)"]
    series = {
        system: [
            next((_median(m, "jobs_per_s") for m in ms if m["label"].startswith(g)), None)
            for g in ("bulk", "single")
        ]
        for system, ms in found.items()
    }
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.5))
    for ax, i in zip(axes, range(2), strict=True):
        _bars(ax, [groups[i]], {s: [v[i]] for s, v in series.items()}, "jobs/s (median)")
    fig.suptitle("Enqueue throughput")
    _save(fig, out, "bench-enqueue.svg", written)


def latency_chart(results: dict[str, Any], out: Path, written: list[Path]) -> None:
    found = _by_system(results, "latency")
    if not found:
        return
    percentiles = ["p50_ms", "p95_ms", "p99_ms"]
    series = {s: [_median(ms[0], p) for p in percentiles] for s, ms in found.items()}
    fig, ax = plt.subplots(figsize=(7, 3.5))
    _bars(ax, ["p50", "p95", "p99"], series, "ms, enqueue call to handler start")
    ax.set_title("Pickup latency at low load")
    _save(fig, out, "bench-latency.svg", written)


def scaleout_chart(results: dict[str, Any], out: Path, written: list[Path]) -> None:
    found = _by_system(results, "scaleout")
    if not found:
        return
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for system, ms in found.items():
        points = sorted((m["samples"][0]["processes"], _median(m, "jobs_per_s")) for m in ms)
        xs, ys = zip(*points, strict=True)
        ax.plot(xs, ys, marker="o", label=system)
    ax.set_xlabel("worker processes")
    ax.set_ylabel("jobs/s (median)")
    ax.set_title("Scale-out: processes draining one queue")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    _save(fig, out, "bench-scaleout.svg", written)


def soak_chart(results: dict[str, Any], out: Path, written: list[Path]) -> None:
    found = _by_system(results, "soak")
    if not found:
        return
    fig, (dead, rate) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    for system, ms in found.items():
        samples = ms[0]["samples"][0]["samples"]
        ts = [p["t_s"] for p in samples]
        dead.plot(ts, [p["dead_tuples"] for p in samples], marker=".", label=system)
        rate.plot(ts, [p["jobs_per_s"] for p in samples], marker=".", label=system)
    # Symmetric log: zero stays plottable, and hundreds stay visible beside tens of thousands.
    dead.set_yscale("symlog", linthresh=100)
    dead.set_ylabel("n_dead_tup, system's tables")
    dead.set_title("Soak with the xmin horizon pinned")
    rate.set_ylabel("completed jobs/s")
    rate.set_xlabel("seconds")
    for ax in (dead, rate):
        ax.legend(fontsize="small")
        ax.grid(alpha=0.3)
    _save(fig, out, "bench-soak.svg", written)


CHARTS = (drain_chart, enqueue_chart, latency_chart, scaleout_chart, soak_chart)


def _cell(m: dict[str, Any] | None) -> str:
    if m is None:
        return "—"
    if m["workload"] == "latency":
        p50, p95, p99 = (_median(m, f"p{p}_ms") for p in (50, 95, 99))
        return f"{p50:.1f} / {p95:.1f} / {p99:.1f}"
    value = _median(m, m["metric"])
    text = "—" if value is None else f"{value:,.0f}"
    rss = _median(m, "peak_rss_mb") if m["workload"] == "drain" else None
    if rss is not None:
        text += f" ({rss:.0f} MB)"
    if m["workload"] == "soak":
        text += f"; dead tuples max {_median(m, 'max_dead_tuples') or 0:,.0f}"
    if any(s["problems"] for s in m["samples"]):
        text += " **problems**"
    return text


def markdown_table(results: dict[str, Any]) -> str:
    """Medians, one row per measurement, one column per system, for docs/benchmarks.md."""
    names = list(results["environment"]["versions"])
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for key, m in results["measurements"].items():
        rows.setdefault(key.split(".", 1)[1], {})[m["system"]] = m
    lines = [
        "| measurement | " + " | ".join(names) + " |",
        "| --- | " + " | ".join("---:" for _ in names) + " |",
    ]
    for by_system in rows.values():
        label = next(iter(by_system.values()))["label"]
        lines.append(f"| {label} | " + " | ".join(_cell(by_system.get(n)) for n in names) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sidebyside.plot")
    parser.add_argument("results", type=Path)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    args = parser.parse_args(argv)
    results = json.loads(args.results.read_text())
    if args.markdown:
        print(markdown_table(results))
    args.out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for chart in CHARTS:
        chart(results, args.out, written)
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
