"""Line charts as inline SVG, rendered on the server: no JavaScript, no CDN, no extra package.

A chart covers a fixed time window (the last hour on the queue health page), so gaps in the
samples show as gaps in time rather than being stretched away.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape
from typing import Final

from django.utils.safestring import SafeString, mark_safe

WIDTH: Final = 480
HEIGHT: Final = 160
# Room for the y labels on the left and the x labels and legend below.
LEFT: Final = 44
RIGHT: Final = 8
TOP: Final = 10
BOTTOM: Final = 40
X_TICKS: Final = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class Series:
    """One line: a name for the legend, a CSS colour, and (time, value) points in time order."""

    name: str
    color: str
    points: Sequence[tuple[datetime, float]]


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


def _label(value: float) -> str:
    return f"{value:g}" if value < 10_000 else f"{value / 1000:g}k"


def line_chart(
    series: Sequence[Series], *, start: datetime, end: datetime, title: str, unit: str
) -> SafeString:
    """An SVG chart of ``series`` between ``start`` and ``end``, y from 0 to a round maximum."""
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    span_s = max((end - start).total_seconds(), 1.0)
    peak = max((value for line in series for _, value in line.points), default=0.0)
    y_max = _nice_ceiling(peak)

    def x(at: datetime) -> float:
        return LEFT + plot_w * min(max((at - start).total_seconds() / span_s, 0.0), 1.0)

    def y(value: float) -> float:
        return TOP + plot_h * (1 - value / y_max)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}" '
        'font-family="sans-serif" font-size="10">',
        f"<title>{escape(title)}</title>",
    ]
    for fraction in (0.0, 0.5, 1.0):
        level = y(y_max * fraction)
        parts.append(
            f'<line x1="{LEFT}" y1="{level:.1f}" x2="{WIDTH - RIGHT}" y2="{level:.1f}" '
            'stroke="#ccc" stroke-width="1"/>'
            f'<text x="{LEFT - 4}" y="{level + 3:.1f}" text-anchor="end" fill="#666">'
            f"{_label(y_max * fraction)}</text>"
        )
    minutes = span_s / 60
    for tick in range(X_TICKS + 1):
        at_x = LEFT + plot_w * tick / X_TICKS
        ago = minutes * (X_TICKS - tick) / X_TICKS
        parts.append(
            f'<text x="{at_x:.1f}" y="{TOP + plot_h + 13}" text-anchor="middle" fill="#666">'
            f"{'now' if ago == 0 else f'-{ago:g}m'}</text>"
        )
    parts.append(
        f'<text x="{LEFT}" y="{TOP + 2}" fill="#666" dy="-2" font-size="9">{escape(unit)}</text>'
    )
    for index, line in enumerate(series):
        color = escape(line.color)
        if len(line.points) == 1:
            ((at, value),) = line.points
            parts.append(f'<circle cx="{x(at):.1f}" cy="{y(value):.1f}" r="2" fill="{color}"/>')
        elif line.points:
            coords = " ".join(f"{x(at):.1f},{y(value):.1f}" for at, value in line.points)
            parts.append(
                f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="1.5"/>'
            )
        legend_x = LEFT + index * 110
        parts.append(
            f'<rect x="{legend_x}" y="{HEIGHT - 12}" width="10" height="3" fill="{color}"/>'
            f'<text x="{legend_x + 14}" y="{HEIGHT - 8}" fill="#333">{escape(line.name)}</text>'
        )
    parts.append("</svg>")
    # Every interpolated string above is escaped or a number we formatted.
    return mark_safe("".join(parts))
