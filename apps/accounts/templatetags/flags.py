"""``{% flag "key" as on %}`` (after ``{% load flags %}``): templates call ``flags.is_enabled``."""

from __future__ import annotations

from typing import Any

from django import template

from apps.accounts.services import flags

register = template.Library()


@register.simple_tag(takes_context=True)
def flag(context: dict[str, Any], key: str) -> bool:
    request = context.get("request")
    return flags.is_enabled(key, getattr(request, "user", None), source="template")
