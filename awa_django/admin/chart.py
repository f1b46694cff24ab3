"""Line charts as inline SVG, rendered on the server: no JavaScript, no CDN, no extra package.

A chart covers a fixed time window (the last hour, 24 hours or 7 days on the queue health page),
so gaps in the samples show as gaps in time rather than being stretched away; the time axis is
in minutes, hours or days ago as the window's length suits. Its values can be read without
a script: the legend gives each line's latest value and maximum, the highest point is labelled,
and every point carries an SVG ``<title>`` that browsers show on hover.

When one burst dwarfs the rest of the window, a linear axis up to the burst's peak would draw
everything else on the zero line; the y axis then switches to a logarithmic one (decades from
1, with 0 at the bottom), which keeps the steady rate and the burst readable on the same chart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape
from statistics import median
from typing import Final

from django.utils.safestring import SafeString, mark_safe

WIDTH: Final = 480
# Room for the y labels on the left and the x labels, axis title and legend below.
LEFT: Final = 44
RIGHT: Final = 8
TOP: Final = 14
PLOT_HEIGHT: Final = 110
AXIS_ROOM: Final = 28
LEGEND_ROW: Final = 14
LEGEND_COLUMNS: Final = 2
X_TICKS: Final = 4
# A peak this many times the median of the positive values is a burst: the axis goes log.
BURST_RATIO: Final = 10.0
# The least distance between two y-axis labels, and the width of a bold character of the
# admin's 11-pixel chart text (generous, so an estimated label never runs out of the plot).
TICK_LABEL_ROOM: Final = 12.0
BOLD_CHAR_WIDTH: Final = 7.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Series:
    """One line: a name for the legend, a CSS colour, and (time, value) points in time order."""

    name: str
    color: str
    points: Sequence[tuple[datetime, float]]


@dataclass(frozen=True, slots=True)
class Scale:
    """The y axis: where a value sits as a fraction of the plot's height, and its ticks."""

    top: float
    logarithmic: bool

    def fraction(self, value: float) -> float:
        if self.logarithmic:
            return math.log10(1 + max(value, 0.0)) / math.log10(1 + self.top)
        return value / self.top

    def ticks(self) -> list[float]:
        if self.logarithmic:
            return [0.0] + [10.0**power for power in range(round(math.log10(self.top)) + 1)]
        return [0.0, self.top / 2, self.top]


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^n at or above ``value`` (at least 1), so the y axis
    ends on a round number."""
    if value <= 1:
        return 1.0
    magnitude = 10 ** (len(str(int(value))) - 1)
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * magnitude:
            return float(step * magnitude)
    return float(10 * magnitude)


def y_scale(values: Sequence[float]) -> Scale:
    """Linear from 0 to a round number at or above the peak, unless the peak is a burst
    (``BURST_RATIO`` times the median positive value): then log up to the decade above it."""
    positive = [value for value in values if value > 0]
    if not positive:
        return Scale(1.0, logarithmic=False)
    peak = max(positive)
    if peak > BURST_RATIO * median(positive):
        # At least one decade, so a burst of small rates still gets the ticks 0, 1, 10.
        return Scale(max(10.0 ** math.ceil(math.log10(peak)), 10.0), logarithmic=True)
    return Scale(_nice_ceiling(peak), logarithmic=False)


def _label(value: float) -> str:
    # Three significant digits past ten thousand: "31.7k", not "31.6606k".
    if value >= 1_000_000:
        return f"{value / 1_000_000:.3g}M"
    if value >= 10_000:
        return f"{value / 1000:.3g}k"
    # Rates are fractions; a tenth is as fine as an operator reads them.
    return f"{value:.1f}".removesuffix(".0") if value < 100 else f"{value:.0f}"


@dataclass(frozen=True, slots=True)
class TimeUnit:
    """How a window's time axis counts back from now: its unit's seconds, the suffix of a
    label ("-25m"), the axis title, and how many intervals the axis is cut into."""

    seconds: float
    suffix: str
    title: str
    ticks: int


def time_unit(span_s: float) -> TimeUnit:
    """Minutes up to two hours, hours up to two days, days beyond."""
    if span_s <= 2 * 3600:
        return TimeUnit(60.0, "m", "minutes ago", X_TICKS)
    if span_s <= 2 * 86400:
        return TimeUnit(3600.0, "h", "hours ago", X_TICKS)
    return TimeUnit(86400.0, "d", "days ago", max(round(span_s / 86400), 1))


def _ago(at: datetime, end: datetime, unit: TimeUnit) -> str:
    # Whole minutes; hours and days to a tenth under ten ("-2.5d"), whole from ten on.
    ago = (end - at).total_seconds() / unit.seconds
    if unit.seconds == 60.0:
        ago = round(ago)
        return "now" if ago <= 0 else f"-{ago}m"
    rounded = round(ago, 1) if ago < 10 else round(ago)
    return "now" if rounded <= 0 else f"-{rounded:g}{unit.suffix}"


def chart_height(series_count: int) -> int:
    """The SVG's height: the plot, the x axis, and one legend row per ``LEGEND_COLUMNS``
    series."""
    rows = max(math.ceil(series_count / LEGEND_COLUMNS), 1)
    return TOP + PLOT_HEIGHT + AXIS_ROOM + rows * LEGEND_ROW


def _axes(
    scale: Scale, y: Callable[[float], float], span_s: float, unit: str, when: TimeUnit
) -> list[str]:
    plot_w = WIDTH - LEFT - RIGHT
    parts = []
    labelled_at: float | None = None
    for tick in scale.ticks():
        level = y(tick)
        parts.append(
            f'<line x1="{LEFT}" y1="{level:.1f}" x2="{WIDTH - RIGHT}" y2="{level:.1f}" '
            'stroke="#ccc" stroke-width="1"/>'
        )
        # On a log axis 0 and 1 can sit closer than a line of text: the line is drawn, the
        # label that would overlap the one below it is not.
        if labelled_at is not None and labelled_at - level < TICK_LABEL_ROOM:
            continue
        parts.append(
            f'<text x="{LEFT - 4}" y="{level + 3:.1f}" text-anchor="end" fill="#666">'
            f"{_label(tick)}</text>"
        )
        labelled_at = level
    units = span_s / when.seconds
    for tick in range(when.ticks + 1):
        at_x = LEFT + plot_w * tick / when.ticks
        ago = round(units * (when.ticks - tick) / when.ticks, 1)
        parts.append(
            f'<text x="{at_x:.1f}" y="{TOP + PLOT_HEIGHT + 13}" text-anchor="middle" '
            f'fill="#666">{"now" if ago == 0 else f"-{ago:g}{when.suffix}"}</text>'
        )
    axis_y = TOP + PLOT_HEIGHT + 24
    parts.append(
        f'<text x="{LEFT + plot_w / 2:.1f}" y="{axis_y}" text-anchor="middle" fill="#666" '
        f'font-size="9">{when.title}</text>'
        f'<text x="{LEFT}" y="{TOP - 4}" fill="#666" font-size="9">'
        f"{escape(unit)}{', log scale' if scale.logarithmic else ''}</text>"
    )
    return parts


def line_chart(
    series: Sequence[Series], *, start: datetime, end: datetime, title: str, unit: str
) -> SafeString:
    """An SVG chart of ``series`` between ``start`` and ``end``, with its values labelled."""
    plot_w = WIDTH - LEFT - RIGHT
    height = chart_height(len(series))
    span_s = max((end - start).total_seconds(), 1.0)
    when = time_unit(span_s)
    scale = y_scale([value for line in series for _, value in line.points])

    def x(at: datetime) -> float:
        return LEFT + plot_w * min(max((at - start).total_seconds() / span_s, 0.0), 1.0)

    def y(value: float) -> float:
        return TOP + PLOT_HEIGHT * (1 - min(scale.fraction(value), 1.0))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}" role="img" aria-label="{escape(title)}" '
        'font-family="sans-serif" font-size="10">',
        f"<title>{escape(title)}</title>",
        *_axes(scale, y, span_s, unit, when),
    ]
    highest: tuple[float, datetime] | None = None
    for index, line in enumerate(series):
        color = escape(line.color)
        name = escape(line.name)
        if len(line.points) > 1:
            coords = " ".join(f"{x(at):.1f},{y(value):.1f}" for at, value in line.points)
            parts.append(
                f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="1.5"/>'
            )
        for at, value in line.points:
            # A lone point is drawn; on a line the circle is an invisible hover target.
            opacity = "" if len(line.points) == 1 else ' fill-opacity="0"'
            parts.append(
                f'<circle cx="{x(at):.1f}" cy="{y(value):.1f}" r="2.5" fill="{color}"{opacity}>'
                f"<title>{name}: {_label(value)} {escape(unit)}, "
                f"{_ago(at, end, when)}</title></circle>"
            )
            if highest is None or value > highest[0]:
                highest = (value, at)
        row, column = divmod(index, LEGEND_COLUMNS)
        legend_x = LEFT + column * plot_w / LEGEND_COLUMNS
        legend_y = TOP + PLOT_HEIGHT + AXIS_ROOM + row * LEGEND_ROW + 8
        reading = (
            f"{_label(line.points[-1][1])} now, max {_label(max(v for _, v in line.points))}"
            if line.points
            else "no data"
        )
        parts.append(
            f'<rect x="{legend_x:.1f}" y="{legend_y - 4}" width="10" height="3" fill="{color}"/>'
            f'<text x="{legend_x + 14:.1f}" y="{legend_y}" fill="#333">{name}: {reading}</text>'
        )
    if highest is not None and highest[0] > 0:
        value, at = highest
        text = f"peak {_label(value)} ({_ago(at, end, when)})"
        # Centred over the peak, but kept whole inside the plot (an estimate of its width:
        # the SVG is drawn on the server, which cannot measure text).
        half = len(text) * BOLD_CHAR_WIDTH / 2
        label_x = min(max(x(at), LEFT + half), WIDTH - RIGHT - half)
        parts.append(
            f'<text class="awa-peak" x="{label_x:.1f}" y="{max(y(value) - 4, TOP + 8):.1f}" '
            f'text-anchor="middle" fill="#333" font-weight="bold">{text}</text>'
        )
    parts.append("</svg>")
    # Every interpolated string above is escaped or a number we formatted.
    return mark_safe("".join(parts))
