"""``{% site_banners %}``: the banners this visitor sees on this page (``services.banners``)."""

from __future__ import annotations

from typing import Any

from django import template
from django.db import DatabaseError

from apps.accounts.services import banners

register = template.Library()


@register.inclusion_tag("accounts/_site_banners.html", takes_context=True)
def site_banners(context: dict[str, Any]) -> dict[str, Any]:
    request = context.get("request")
    if request is None:
        return {"banners": []}
    try:
        shown = banners.visible(
            getattr(request, "user", None), request.path, request.COOKIES.get(banners.COOKIE)
        )
    except DatabaseError:
        # Announcements are never worth failing a page (the outage page renders base.html too).
        shown = []
    return {"banners": shown, "request": request, "csrf_token": context.get("csrf_token")}
