"""``{{ value|when }}``: one way to show a moment on every page, ``4 Dec 2026, 15:21 UTC``.

Takes a datetime or an ISO 8601 string (capabilities hand pages ISO strings); anything else is
shown as it is. Pages say UTC until people have a time zone of their own.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django import template

register = template.Library()


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
    moment = moment.astimezone(UTC)
    return f"{moment.day} {moment:%b %Y, %H:%M} UTC"
