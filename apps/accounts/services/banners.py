"""Site banners: which operator announcements a visitor sees on a page, and dismissing them.

A banner shows when it is enabled, inside its schedule (``starts_at`` ≤ now < ``ends_at``, either
open), its audience matches (everyone, signed out, signed in, listed stable user ids, listed
plans), and its page targeting matches (all pages, or ``route_patterns`` as shell-style globs
on the path). A signed-in person's dismissal is a row kept forever; a signed-out visitor's is
the ``kody_banner_dismissed`` cookie, which holds at most ``COOKIE_MAX_IDS`` ids.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from apps.accounts.models import SiteBanner, SiteBannerDismissal
from apps.accounts.models.platform import BannerAudience, BannerPageTargeting
from kody.errors import NotFound

COOKIE = "kody_banner_dismissed"
COOKIE_MAX_IDS = 50
COOKIE_MAX_AGE = 400 * 24 * 3600  # browsers cap cookie lifetimes near 400 days
_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_SHOWN = 3


def cookie_ids(raw: str | None) -> list[str]:
    """Dismissed ids from the cookie; anything malformed is ignored, never trusted."""
    if not raw:
        return []
    return [part for part in raw.split(".") if _ID.match(part)][-COOKIE_MAX_IDS:]


def _audience_matches(banner: SiteBanner, user: Any) -> bool:
    signed_in = user is not None
    match banner.audience:
        case BannerAudience.EVERYONE:
            return True
        case BannerAudience.LOGGED_OUT:
            return not signed_in
        case BannerAudience.LOGGED_IN:
            return signed_in
        case BannerAudience.USERS:
            ids = banner.audience_user_ids if isinstance(banner.audience_user_ids, list) else []
            return signed_in and user.stable_user_id in ids
        case BannerAudience.PLANS:
            plans = banner.audience_plans if isinstance(banner.audience_plans, list) else []
            return signed_in and user.plan in plans
    return False


def _page_matches(banner: SiteBanner, path: str) -> bool:
    if banner.page_targeting == BannerPageTargeting.ALL:
        return True
    patterns = banner.route_patterns if isinstance(banner.route_patterns, list) else []
    return any(isinstance(p, str) and fnmatch.fnmatchcase(path, p) for p in patterns)


def visible(user: Any, path: str, dismissed_cookie: str | None = None) -> list[SiteBanner]:
    person = user if getattr(user, "is_authenticated", False) else None
    now = timezone.now()
    candidates = SiteBanner.objects.filter(
        Q(starts_at__isnull=True) | Q(starts_at__lte=now),
        Q(ends_at__isnull=True) | Q(ends_at__gt=now),
        enabled=True,
    ).order_by("-priority", "created_at")
    if person is not None:
        dismissed = set(
            SiteBannerDismissal.objects.filter(user=person).values_list("banner_id", flat=True)
        )
    else:
        dismissed = set(cookie_ids(dismissed_cookie))
    shown = [
        b
        for b in candidates
        if not (b.dismissible and b.pk in dismissed)
        and _audience_matches(b, person)
        and _page_matches(b, path)
    ]
    return shown[:MAX_SHOWN]


def dismiss(user: Any, banner_id: str, dismissed_cookie: str | None = None) -> str | None:
    """Record a dismissal; returns the new cookie value for a signed-out visitor, else None."""
    banner = SiteBanner.objects.filter(pk=banner_id, dismissible=True).first()
    if banner is None:
        raise NotFound("No dismissible banner with that id.")
    if getattr(user, "is_authenticated", False):
        try:
            with transaction.atomic():
                SiteBannerDismissal.objects.get_or_create(banner=banner, user=user)
        except IntegrityError:
            pass  # a concurrent dismissal of the same banner already landed
        return None
    ids = [i for i in cookie_ids(dismissed_cookie) if i != banner.pk] + [banner.pk]
    return ".".join(ids[-COOKIE_MAX_IDS:])
