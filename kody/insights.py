"""The admin's insights page (/admin/insights/): content-free product metrics for operators.

Each app registers the panels it can answer from its own tables (``register_panel`` in its
``admin.py``, the same seam the console's attention counts use), so ``kody`` never imports an
app. A panel returns a ``kody.charts.Chart`` of platform-wide counts: no user id, address,
subject or body ever reaches it. A panel whose source fails renders as unavailable and the rest
of the page still renders.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kody import charts

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Panel:
    key: str
    title: str
    order: int
    load: Callable[[datetime], charts.Chart]


_panels: dict[str, Panel] = {}


def register_panel(
    key: str, title: str, load: Callable[[datetime], charts.Chart], *, order: int = 100
) -> None:
    _panels[key] = Panel(key=key, title=title, order=order, load=load)


def panels(now: datetime) -> list[dict[str, Any]]:
    rows = []
    for panel in sorted(_panels.values(), key=lambda p: (p.order, p.key)):
        try:
            chart = panel.load(now)
        except Exception as exc:  # noqa: BLE001 - one source down must not take the page down
            log.warning("insights panel %s unavailable (%s)", panel.key, type(exc).__name__)
            rows.append({"key": panel.key, "title": panel.title, "available": False})
            continue
        rows.append(
            {
                "key": panel.key,
                "title": panel.title,
                "available": True,
                "svg": charts.svg(chart, panel.title),
                "legend": charts.legend(chart),
                "series": [s.name for s in chart.series],
                "rows": chart.rows(),
                "total": chart.total,
                "note": chart.note,
            }
        )
    return rows
