"""The server-rendered SVG chart of the queue health page."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest

from awa_django.admin.chart import (
    BOLD_CHAR_WIDTH,
    LEFT,
    PLOT_HEIGHT,
    RIGHT,
    TOP,
    WIDTH,
    Series,
    _label,
    _nice_ceiling,
    chart_height,
    line_chart,
    y_scale,
)

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

    height = chart_height(2)
    assert root.get("viewBox") == f"0 0 {WIDTH} {height}"
    (completed, failed) = points(root)
    xs = [x for x, _ in completed]
    assert xs == sorted(xs) and xs[0] < xs[-1]
    assert all(
        0 <= x <= WIDTH and 0 <= y <= height for line in (completed, failed) for x, y in line
    )
    # The peak (60) is drawn at 60% of an axis that ends at the round 100.
    plot_top, plot_bottom = TOP, TOP + PLOT_HEIGHT
    assert min(y for _, y in completed) == pytest.approx(
        plot_bottom - 0.6 * (plot_bottom - plot_top), abs=0.1
    )
    labels = [text.text for text in root.iter(f"{SVG}text")]
    assert "-60m" in labels and "now" in labels and "minutes ago" in labels
    # The legend reads each line's latest value and maximum; the highest point is labelled.
    assert "completed: 60 now, max 60" in labels and "failed: 4 now, max 4" in labels
    assert "peak 60 (now)" in labels and "jobs/min" in labels


def test_names_are_escaped():
    series = [Series(name="<script>q</script>", color="red", points=[(END, 1.0)])]
    svg = line_chart(series, start=START, end=END, title="a & b", unit="x")
    assert "<script>" not in svg
    root = parse(svg)
    assert root.find(f"{SVG}title").text == "a & b"
    [point] = root.iter(f"{SVG}circle")
    assert point.get("fill-opacity") is None  # a lone point is drawn, not only hoverable


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


def test_every_point_carries_its_value_as_a_hover_title():
    series = [
        Series(
            name="available",
            color="blue",
            points=[(END - timedelta(minutes=10), 12.0), (END, 3.25)],
        )
    ]
    root = parse(line_chart(series, start=START, end=END, title="t", unit="jobs"))
    titles = [circle.find(f"{SVG}title").text for circle in root.iter(f"{SVG}circle")]
    assert titles == ["available: 12 jobs, -10m", "available: 3.2 jobs, now"]


def test_a_burst_switches_the_axis_to_log_so_the_steady_rate_stays_off_the_zero_line():
    steady = [(START + timedelta(minutes=m), 5.0) for m in range(60)]
    burst = [*steady[:30], (START + timedelta(minutes=30), 500.0), *steady[31:]]
    root = parse(
        line_chart(
            [Series(name="completed", color="green", points=burst)],
            start=START,
            end=END,
            title="t",
            unit="jobs/min",
        )
    )
    labels = [text.text for text in root.iter(f"{SVG}text")]
    assert "jobs/min, log scale" in labels and "peak 500 (-30m)" in labels
    # Every decade has its line; the label of 1, a line of text above 0, is left out.
    assert {"0", "10", "100", "1000"} <= set(labels) and "1" not in labels
    assert len([line for line in root.iter(f"{SVG}line") if line.get("x1") == str(LEFT)]) >= 5
    ((*_, (_, steady_y)),) = points(root)
    zero_line, top_line = TOP + PLOT_HEIGHT, TOP
    # log10(1 + 5) / log10(1 + 1000): a quarter of the way up, not a pixel above zero.
    assert steady_y == pytest.approx(zero_line - 0.259 * (zero_line - top_line), abs=0.5)


def test_the_axis_stays_linear_without_a_burst():
    assert y_scale([30.0, 55.0, 41.0]) == y_scale([55.0])
    assert not y_scale([30.0, 55.0]).logarithmic and y_scale([30.0, 55.0]).top == 100
    assert y_scale([5.0] * 50 + [500.0]).logarithmic
    assert y_scale([]).top == 1 and not y_scale([0.0, 0.0]).logarithmic
    # A burst of small rates still spans a decade.
    assert y_scale([0.01] * 9 + [0.5]).top == 10


def test_large_values_read_with_three_significant_digits():
    assert [_label(v) for v in (9_999, 31_660.6, 250_000, 1_234_567)] == [
        "9999",
        "31.7k",
        "250k",
        "1.23M",
    ]


def test_a_peak_label_at_the_edge_stays_whole_inside_the_chart():
    for at in (START, END):
        series = [Series(name="depth", color="blue", points=[(at, 31_660.6)])]
        root = parse(line_chart(series, start=START, end=END, title="t", unit="jobs"))
        [peak] = [t for t in root.iter(f"{SVG}text") if t.get("class") == "awa-peak"]
        half = len(peak.text) * BOLD_CHAR_WIDTH / 2
        assert peak.text.startswith("peak 31.7k (")
        assert float(peak.get("x")) - half >= LEFT
        assert float(peak.get("x")) + half <= WIDTH - RIGHT


@pytest.mark.parametrize(
    ("span", "labels", "title"),
    [
        (timedelta(hours=24), ["-24h", "-18h", "-12h", "-6h", "now"], "hours ago"),
        (timedelta(days=7), ["-7d", "-6d", "-5d", "-4d", "-3d", "-2d", "-1d", "now"], "days ago"),
    ],
    ids=["24h", "7d"],
)
def test_longer_windows_count_back_in_hours_or_days(span, labels, title):
    peak_at = END - (timedelta(hours=2.5) if span == timedelta(hours=24) else timedelta(days=3.5))
    series = [Series(name="s", color="blue", points=[(END - span, 1.0), (peak_at, 9.0)])]
    root = parse(line_chart(series, start=END - span, end=END, title="t", unit="u"))
    texts = [text.text for text in root.iter(f"{SVG}text")]
    assert [t for t in texts if t in labels] == labels and title in texts
    # The peak says how long ago in the same unit, to a tenth under ten.
    expected = "peak 9 (-2.5h)" if span == timedelta(hours=24) else "peak 9 (-3.5d)"
    assert expected in texts
