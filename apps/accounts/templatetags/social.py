"""``{% social_providers as providers %}`` and ``{% social_connections as rows %}`` (after
``{% load social %}``): the sign-in buttons and the signed-in person's linked providers."""

from __future__ import annotations

from typing import Any

from django import template

from apps.accounts.models import User
from apps.accounts.services import social
from apps.accounts.social import providers

register = template.Library()


@register.simple_tag
def social_providers() -> list[providers.Provider]:
    return list(providers.configured().values())


@register.simple_tag(takes_context=True)
def social_connections(context: dict[str, Any]) -> list[dict[str, Any]]:
    request = context.get("request")
    user = getattr(request, "user", None)
    return social.list_connections(user) if isinstance(user, User) else []
