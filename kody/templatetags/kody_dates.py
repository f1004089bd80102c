"""``{{ value|when }}``: one way to show a moment on every page, ``4 Dec 2026, 15:21 UTC``.

Takes a datetime or an ISO 8601 string (capabilities hand pages ISO strings); anything else is
shown as it is. The moment is shown in the request's active time zone — the person's own once
they chose one (activated per request by the accounts app), UTC otherwise — followed by that
zone's abbreviation (``CET``), or its UTC offset where the zone has no letters for it
(``UTC+05:30``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django import template
from django.utils import timezone

register = template.Library()


def zone_label(moment: datetime) -> str:
    abbreviation = moment.tzname() or ""
    if abbreviation.isalpha():
        return abbreviation
    offset = moment.utcoffset()
    if not offset:
        return "UTC"
    minutes = int(offset.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    return f"UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


@register.filter
def when(value: Any) -> str:
    moment = value
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    if not isinstance(moment, datetime):
        return "" if value is None else str(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(timezone.get_current_timezone())
    return f"{moment.day} {moment:%b %Y, %H:%M} {zone_label(moment)}"
