"""The public catalog pages: browse, profiles, listing pages and icons. No login needed.

Anonymous responses carry CDN cache headers; a signed-in visitor's page (which shows their own
navigation) is private. Old usernames and old kody ids answer 301 to where they live now.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.shortcuts import render
from django.utils.cache import patch_cache_control, patch_vary_headers

from apps.accounts.models import User
from apps.accounts.models.identity import UsernameRedirect
from apps.community import markdown
from apps.community.models import CommunityFork, CommunityListing, ListingCategory
from apps.community.services import icons, reads, social
from apps.community.services.listings import ListingNotFound, leaf
from apps.community.services.search import search
from apps.packages.models import PackageKodyIdRedirect
from kody.errors import KodyError

PAGE_MAX_AGE = 60
PAGE_CDN_AGE = 300
ICON_MAX_AGE = 3600
ICON_CDN_AGE = 86400


def _cached(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    if request.user.is_authenticated:
        patch_cache_control(response, private=True, no_cache=True)
    else:
        patch_cache_control(response, public=True, max_age=PAGE_MAX_AGE, s_maxage=PAGE_CDN_AGE)
    patch_vary_headers(response, ["Cookie"])
    return response


def _moved(request: HttpRequest, path: str) -> HttpResponse:
    response = HttpResponsePermanentRedirect(path)
    patch_cache_control(response, public=True, max_age=PAGE_MAX_AGE, s_maxage=PAGE_CDN_AGE)
    return response


def _live_user(username: str) -> User | None:
    return User.objects.filter(username=username, deleting_at__isnull=True).first()


def _renamed(username: str) -> User | None:
    moved = UsernameRedirect.objects.filter(old_username=username).first()
    if moved is None:
        return None
    return User.objects.filter(stable_user_id=moved.user_id, deleting_at__isnull=True).first()


def browse(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("q", "")[:200]
    category = request.GET.get("category") or None
    if category not in ListingCategory.values:
        category = None
    try:
        found = search(query, category=category, limit=30, cursor=request.GET.get("cursor"))
    except KodyError:
        found = {"results": [], "nextCursor": None}
    counts = {c: 0 for c in ListingCategory.values}
    for row in reads.visible().values_list("category", flat=True).iterator():
        counts[row] = counts.get(row, 0) + 1
    context = {
        "query": query,
        "category": category,
        "chips": [(c, ListingCategory(c).label, counts[c]) for c in ListingCategory.values],
        "results": found["results"],
        "next_cursor": found["nextCursor"],
    }
    return _cached(request, render(request, "community/browse.html", context))


def profile(request: HttpRequest, username: str) -> HttpResponse:
    user = _live_user(username)
    if user is None:
        moved = _renamed(username)
        if moved is None:
            raise Http404("No such user.")
        return _moved(request, f"/@{moved.username}")
    viewer = request.user.stable_user_id if request.user.is_authenticated else None
    data = social.profile(viewer, user.username)["profile"]
    return _cached(request, render(request, "community/profile.html", {"profile": data}))


def listing(request: HttpRequest, username: str, kody_id: str) -> HttpResponse:
    user = _live_user(username)
    if user is None:
        moved = _renamed(username)
        if moved is None:
            raise Http404("No such user.")
        return _moved(request, f"/@{moved.username}/{kody_id}")
    try:
        row = reads.find(None, owner=user.username, kody_id=kody_id)
    except ListingNotFound:
        target = _redirected_listing(user, kody_id)
        if target is None:
            raise Http404("No such listing.") from None
        return _moved(request, f"/@{user.username}/{leaf(target.kody_id)}")
    data = reads.detail(row)
    forks = list(
        CommunityFork.objects.filter(listing_id=row.id)
        .order_by("-created_at")
        .values_list("target_kody_id", flat=True)[:10]
    )
    context: dict[str, Any] = {
        "listing": data,
        "owner": user,
        "readme_html": markdown.render(row.readme_content),
        "forks": forks,
    }
    return _cached(request, render(request, "community/listing.html", context))


def _redirected_listing(user: User, kody_id: str) -> CommunityListing | None:
    old = kody_id if kody_id.startswith("@") else None
    rows = PackageKodyIdRedirect.objects.filter(user_id=user.stable_user_id)
    moved = (
        rows.filter(old_kody_id=old).first()
        if old
        else rows.filter(old_kody_id__endswith=f"/{kody_id}").order_by("-created_at").first()
    )
    if moved is None:
        return None
    return (
        reads.visible()
        .filter(owner_user_id=user.stable_user_id, package_id=moved.package_id)
        .first()
    )


def icon(request: HttpRequest, listing_id: str) -> HttpResponse:
    row = reads.visible().filter(id=listing_id).first()
    found = icons.read(row.id, row.pinned_commit) if row is not None else None
    if found is None:
        raise Http404("No icon.")
    data, content_type = found
    etag = f'"{row.pinned_commit}"'
    if request.headers.get("If-None-Match") == etag:
        response = HttpResponse(status=304)
    else:
        response = HttpResponse(data, content_type=content_type)
    response["ETag"] = etag
    response["X-Content-Type-Options"] = "nosniff"
    patch_cache_control(response, public=True, max_age=ICON_MAX_AGE, s_maxage=ICON_CDN_AGE)
    return response
