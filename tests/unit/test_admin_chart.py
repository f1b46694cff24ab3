"""The server-rendered SVG chart of the queue health page."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest

from awa_django.admin.chart import BOTTOM, HEIGHT, TOP, WIDTH, Series, _nice_ceiling, line_chart

SVG = "{http://www.w3.org/2000/svg}"
END = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
START = END - timedelta(hours=1)


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def points(root: ET.Element) -> list[list[tuple[float, float]]]:
    return [
        [tuple(map(float, pair.split(","))) for pair in line.get("points").split()]
        for line in root.iter(f"{SVG}polyline")
    ]


def test_lines_span_the_window_and_stay_inside_the_plot():
    series = [
        Series(
            name="completed",
            color="#2e7d32",
            points=[(START + timedelta(minutes=m), float(m)) for m in range(0, 61, 10)],
        ),
        Series(name="failed", color="#ba2121", points=[(END, 3.0), (END, 4.0)]),
    ]
    root = parse(line_chart(series, start=START, end=END, title="Throughput", unit="jobs/min"))

    assert root.get("viewBox") == f"0 0 {WIDTH} {HEIGHT}"
    (completed, failed) = points(root)
    xs = [x for x, _ in completed]
    assert xs == sorted(xs) and xs[0] < xs[-1]
    assert all(
        0 <= x <= WIDTH and 0 <= y <= HEIGHT for line in (completed, failed) for x, y in line
    )
    # The peak (60) is drawn at 60% of an axis that ends at the round 100.
    plot_top, plot_bottom = TOP, HEIGHT - BOTTOM
    assert min(y for _, y in completed) == pytest.approx(
        plot_bottom - 0.6 * (plot_bottom - plot_top), abs=0.1
    )
    labels = [text.text for text in root.iter(f"{SVG}text")]
    assert "-60m" in labels and "now" in labels and "completed" in labels and "failed" in labels


def test_names_are_escaped():
    series = [Series(name="<script>q</script>", color="red", points=[(END, 1.0)])]
    svg = line_chart(series, start=START, end=END, title="a & b", unit="x")
    assert "<script>" not in svg
    root = parse(svg)
    assert root.find(f"{SVG}title").text == "a & b"
    assert len(list(root.iter(f"{SVG}circle"))) == 1


def test_no_samples_renders_an_empty_chart():
    root = parse(line_chart([], start=START, end=END, title="Depth", unit="jobs"))
    assert points(root) == []
    assert [t.text for t in root.iter(f"{SVG}text")][:3] == ["0", "0.5", "1"]


def test_points_outside_the_window_are_clamped_to_its_edges():
    series = [
        Series(
            name="s",
            color="blue",
            points=[(START - timedelta(hours=1), 1.0), (END + timedelta(hours=1), 1.0)],
        )
    ]
    ((left, right),) = points(parse(line_chart(series, start=START, end=END, title="t", unit="u")))
    assert 0 < left[0] < right[0] < WIDTH


def test_axis_maximum_is_a_round_number_at_or_above_the_peak():
    assert _nice_ceiling(0) == 1
    assert _nice_ceiling(7) == 10
    assert _nice_ceiling(13) == 20
    assert _nice_ceiling(240) == 250
    assert _nice_ceiling(4100) == 5000
    assert _nice_ceiling(1000) == 1000
