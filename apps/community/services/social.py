"""Ratings, stars, follows, the timeline and profiles: rows each user owns about others.

Every write names the caller as the row's user; a listing someone acts on must be visible,
and nobody rates their own listing or follows themselves.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q

from apps.accounts.models import User
from apps.accounts.models.identity import UsernameRedirect
from apps.community.models import (
    CommunityActivityEvent,
    CommunityListing,
    CommunityRating,
    CommunityStar,
    UserFollow,
)
from apps.community.services import reads
from apps.packages.services.repos import decode_cursor, encode_cursor
from kody.errors import Forbidden, InvalidInput, NotFound

MAX_PAGE = 100


class UserNotFound(NotFound):
    code = "user_not_found"
    message = "No user with that username."


def user_by_username(username: str) -> User:
    name = username.lstrip("@")
    user = User.objects.filter(username=name, deleting_at__isnull=True).first()
    if user is None:
        moved = UsernameRedirect.objects.filter(old_username=name).first()
        if moved is not None:
            user = User.objects.filter(
                stable_user_id=moved.user_id, deleting_at__isnull=True
            ).first()
    if user is None:
        raise UserNotFound(details={"username": username})
    return user


def rate(
    user_id: str, listing_id: str, stars: int, effort: int, note: str | None = None
) -> dict[str, Any]:
    listing = reads.find(None, listing_id)
    if listing.owner_user_id == user_id:
        raise Forbidden("You cannot rate your own listing.", code="own_listing")
    row, _ = CommunityRating.objects.update_or_create(
        listing_id=listing.id,
        user_id=user_id,
        defaults={"stars": stars, "adaptation_effort": effort, "note": note or ""},
    )
    return {
        "rating": {
            "listingId": listing.id,
            "stars": row.stars,
            "adaptationEffort": row.adaptation_effort,
            "note": row.note,
            "updatedAt": row.updated_at.isoformat(),
        }
    }


def star(user_id: str, listing_id: str) -> dict[str, Any]:
    listing = reads.find(None, listing_id)
    CommunityStar.objects.get_or_create(listing_id=listing.id, user_id=user_id)
    return {"starred": True, "listingId": listing.id}


def unstar(user_id: str, listing_id: str) -> dict[str, Any]:
    CommunityStar.objects.filter(listing_id=listing_id, user_id=user_id).delete()
    return {"starred": False, "listingId": listing_id}


def starred(user_id: str, limit: int = 50, cursor: str | None = None) -> dict[str, Any]:
    limit = max(1, min(limit, MAX_PAGE))
    rows = CommunityStar.objects.filter(
        user_id=user_id, listing_id__in=reads.visible().values("id")
    ).order_by("-id")
    after = decode_cursor(cursor, 1)
    if after:
        if not after[0].isdigit():
            raise InvalidInput("That cursor is not one this list gave out.")
        rows = rows.filter(id__lt=int(after[0]))
    page = list(rows[: limit + 1])
    more, page = len(page) > limit, page[:limit]
    by_id = {x.id: x for x in CommunityListing.objects.filter(id__in=[s.listing_id for s in page])}
    names = reads.usernames({x.owner_user_id for x in by_id.values()})
    return {
        "listings": [
            reads.card(by_id[s.listing_id], names.get(by_id[s.listing_id].owner_user_id, ""))
            for s in page
            if s.listing_id in by_id
        ],
        "nextCursor": encode_cursor(str(page[-1].id)) if more else None,
    }


def follow(user_id: str, username: str) -> dict[str, Any]:
    target = user_by_username(username)
    if target.stable_user_id == user_id:
        raise InvalidInput("You cannot follow yourself.", code="self_follow")
    UserFollow.objects.get_or_create(
        follower_user_id=user_id, followee_user_id=target.stable_user_id
    )
    return {"following": True, "username": target.username}


def unfollow(user_id: str, username: str) -> dict[str, Any]:
    target = user_by_username(username)
    UserFollow.objects.filter(
        follower_user_id=user_id, followee_user_id=target.stable_user_id
    ).delete()
    return {"following": False, "username": target.username}


def timeline(user_id: str, limit: int = 50, cursor: str | None = None) -> dict[str, Any]:
    """Listing events of followed users, newest first, keyset-paged on (created_at, id)."""
    limit = max(1, min(limit, MAX_PAGE))
    followees = UserFollow.objects.filter(follower_user_id=user_id).values("followee_user_id")
    rows = CommunityActivityEvent.objects.filter(
        actor_user_id__in=followees, listing_id__in=reads.visible().values("id")
    ).order_by("-created_at", "-id")
    after = decode_cursor(cursor, 2)
    if after:
        rows = rows.filter(Q(created_at__lt=after[0]) | Q(created_at=after[0], id__lt=after[1]))
    page = list(rows[: limit + 1])
    more, page = len(page) > limit, page[:limit]
    by_id = {x.id: x for x in CommunityListing.objects.filter(id__in=[e.listing_id for e in page])}
    names = reads.usernames({e.actor_user_id for e in page})
    events = [
        {
            "id": e.id,
            "type": e.event_type,
            "actor": names.get(e.actor_user_id, ""),
            "listing": reads.card(by_id[e.listing_id], names.get(e.actor_user_id, "")),
            "createdAt": e.created_at.isoformat(),
        }
        for e in page
        if e.listing_id in by_id
    ]
    last = page[-1] if page else None
    return {
        "events": events,
        "nextCursor": encode_cursor(last.created_at.isoformat(), last.id)
        if more and last
        else None,
    }


def profile(viewer_id: str | None, username: str) -> dict[str, Any]:
    user = user_by_username(username)
    uid = user.stable_user_id
    own = viewer_id == uid
    shows_listings = own or user.profile_visibility == "public"
    listings: list[dict[str, Any]] = []
    if shows_listings:
        rows = reads.visible().filter(owner_user_id=uid).order_by("-published_at")[:100]
        listings = [reads.card(r, user.username) for r in rows]
    return {
        "profile": {
            "username": user.username,
            "displayName": user.display_name,
            "bio": user.bio,
            "visibility": user.profile_visibility,
            "hasAvatar": bool(user.avatar_key),
            "followers": UserFollow.objects.filter(followee_user_id=uid).count(),
            "following": UserFollow.objects.filter(follower_user_id=uid).count(),
            "listings": listings,
            "listingsHidden": not shows_listings,
        }
    }


def update_profile(
    user: User,
    display_name: str | None = None,
    bio: str | None = None,
    visibility: str | None = None,
) -> dict[str, Any]:
    with transaction.atomic():
        row = User.objects.select_for_update().get(pk=user.pk)
        if display_name is not None:
            row.display_name = display_name.strip()
        if bio is not None:
            row.bio = bio
        if visibility is not None:
            row.profile_visibility = visibility
        row.save(update_fields=["display_name", "bio", "profile_visibility", "updated_at"])
    return profile(row.stable_user_id, row.username)
