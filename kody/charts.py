"""Server-rendered SVG bar charts for the admin's insights page: no script, no CDN.

A chart is a list of labels (days, months, stages) and one or more named series of counts;
several series stack in one bar per label. The SVG is built from numbers and escaped labels
only, so it is safe to mark as HTML.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT, PAD_LEFT, PAD_BOTTOM, PAD_TOP = 640, 200, 48, 28, 10
# Colour-blind-safe palette (Okabe-Ito); series beyond it reuse the colours in order.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442")


@dataclass(frozen=True)
class Series:
    name: str
    values: list[int]


@dataclass(frozen=True)
class Chart:
    labels: list[str]
    series: list[Series]
    note: str = ""
    # Labels printed under the axis: every ``label_every``-th one (all for short charts).
    label_every: int = field(default=1)

    @property
    def total(self) -> int:
        return sum(sum(s.values) for s in self.series)

    def rows(self) -> list[dict[str, object]]:
        """The same numbers as a table (the chart's accessible twin)."""
        return [
            {"label": label, "values": [s.values[i] for s in self.series]}
            for i, label in enumerate(self.labels)
        ]


_AXIS = 'text-anchor="end" font-size="10"'


def _peak(chart: Chart) -> int:
    stacked = [sum(s.values[i] for s in chart.series) for i in range(len(chart.labels))]
    return max([1, *stacked])


def svg(chart: Chart, title: str) -> SafeString:
    plot_w, plot_h = WIDTH - PAD_LEFT, HEIGHT - PAD_BOTTOM - PAD_TOP
    slot = plot_w / max(1, len(chart.labels))
    bar = max(1.0, slot * 0.8)
    peak = _peak(chart)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'role="img" aria-label="{escape(title)}" class="kody-chart">',
        f'<text x="{PAD_LEFT - 6}" y="{PAD_TOP + 8}" {_AXIS}>{peak}</text>',
        f'<text x="{PAD_LEFT - 6}" y="{PAD_TOP + plot_h}" {_AXIS}>0</text>',
        f'<line x1="{PAD_LEFT}" y1="{PAD_TOP + plot_h}" x2="{WIDTH}" y2="{PAD_TOP + plot_h}" '
        'stroke="#888"/>',
    ]
    for i, label in enumerate(chart.labels):
        x = PAD_LEFT + i * slot + (slot - bar) / 2
        base = float(PAD_TOP + plot_h)
        for n, series in enumerate(chart.series):
            value = series.values[i]
            if value <= 0:
                continue
            h = plot_h * value / peak
            base -= h
            parts.append(
                f'<rect x="{x:.1f}" y="{base:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                f'fill="{PALETTE[n % len(PALETTE)]}"><title>{escape(label)} '
                f"{escape(series.name)}: {value}</title></rect>"
            )
        if i % max(1, chart.label_every) == 0:
            parts.append(
                f'<text x="{x + bar / 2:.1f}" y="{HEIGHT - 10}" text-anchor="middle" '
                f'font-size="10">{escape(label)}</text>'
            )
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - numbers and escaped labels only


def legend(chart: Chart) -> list[dict[str, str]]:
    return [
        {"name": s.name, "colour": PALETTE[n % len(PALETTE)]} for n, s in enumerate(chart.series)
    ]
