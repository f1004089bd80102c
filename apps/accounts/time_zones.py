"""A person's own time zone: chosen on ``/account/settings``, kept in ``users.time_zone`` (an
IANA name; empty means UTC), and activated for each of their requests so that every date a page
shows (the ``when`` filter, Django's ``date`` filter) reads in it. Anonymous pages and people
who never chose one see UTC."""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable
from functools import cache

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone

from apps.accounts.models import User
from kody.errors import InvalidInput, KodyError

UTC = "UTC"


@cache
def choices() -> tuple[str, ...]:
    """Every zone this host's tz database knows, UTC first, the rest sorted."""
    names = {n for n in zoneinfo.available_timezones() if "/" in n and not n.startswith("Etc/")}
    return (UTC, *sorted(names))


def zone_of(user: User) -> zoneinfo.ZoneInfo | None:
    name = getattr(user, "time_zone", "") or ""
    if not name or name == UTC:
        return None
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None  # a zone the tz database dropped since: UTC rather than an error page


def set_time_zone(user: User, name: str) -> User:
    cleaned = (name or "").strip()
    if cleaned not in choices():
        raise InvalidInput("Choose a time zone from the list.", details={"field": "time_zone"})
    user.time_zone = "" if cleaned == UTC else cleaned
    user.save(update_fields=["time_zone", "updated_at"])
    return user


class TimeZoneMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        zone = zone_of(user) if user is not None and user.is_authenticated else None
        if zone is None:
            timezone.deactivate()
        else:
            timezone.activate(zone)
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()


def settings_time_zone(request: HttpRequest) -> HttpResponse:
    """POST ``/account/settings/time-zone``: the zone the person's pages show dates in."""
    assert isinstance(request.user, User)
    try:
        user = set_time_zone(request.user, request.POST.get("time_zone", ""))
    except KodyError as exc:
        context = {"title": "Time zone not changed", "error": exc}
        return render(request, "accounts/problem.html", context, status=exc.status)
    messages.success(request, f"Dates now show in {user.time_zone or UTC}.")
    return redirect("accounts:settings")
