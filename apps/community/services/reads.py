"""What anyone may see of the catalog: visible listings and their public JSON.

Visible means active and published by an account that is not banned. Delisted and
banned-owner listings exist for their owner and moderators only.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Avg, Count, QuerySet

from apps.accounts.models import User
from apps.community.models import (
    CommunityBan,
    CommunityFork,
    CommunityListing,
    CommunityRating,
    CommunityStar,
    ListingStatus,
)
from apps.community.services.listings import ListingNotFound, leaf, url_of


def visible() -> QuerySet[CommunityListing]:
    return CommunityListing.objects.filter(status=ListingStatus.ACTIVE).exclude(
        owner_user_id__in=CommunityBan.objects.values("user_id")
    )


def usernames(user_ids: set[str] | list[str]) -> dict[str, str]:
    return dict(
        User.objects.filter(stable_user_id__in=list(user_ids)).values_list(
            "stable_user_id", "username"
        )
    )


def find(
    viewer_id: str | None,
    listing_id: str | None = None,
    owner: str | None = None,
    kody_id: str | None = None,
) -> CommunityListing:
    """A visible listing (or, for its owner, any of their own) by id or by owner + kody id."""
    rows = visible()
    found = None
    if listing_id:
        found = rows.filter(id=listing_id).first()
        if found is None and viewer_id:
            found = CommunityListing.objects.filter(id=listing_id, owner_user_id=viewer_id).first()
    elif owner and kody_id:
        user = User.objects.filter(username=owner.lstrip("@")).first()
        if user is not None:
            mine = rows.filter(owner_user_id=user.stable_user_id)
            if kody_id.startswith("@"):
                found = mine.filter(kody_id=kody_id).first()
            else:
                found = (
                    mine.filter(kody_id__endswith=f"/{kody_id}").order_by("-published_at").first()
                )
    if found is None:
        raise ListingNotFound(details={"listingId": listing_id, "owner": owner, "kodyId": kody_id})
    return found


def stats(listing_ids: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {
        i: {"ratingCount": 0, "ratingAverage": None, "effortAverage": None, "stars": 0, "forks": 0}
        for i in listing_ids
    }
    for row in (
        CommunityRating.objects.filter(listing_id__in=listing_ids)
        .values("listing_id")
        .annotate(n=Count("id"), avg=Avg("stars"), effort=Avg("adaptation_effort"))
    ):
        out[row["listing_id"]].update(
            ratingCount=row["n"],
            ratingAverage=round(float(row["avg"]), 2),
            effortAverage=round(float(row["effort"]), 2) if row["effort"] is not None else None,
        )
    for name, model in (("stars", CommunityStar), ("forks", CommunityFork)):
        for row in (
            model.objects.filter(listing_id__in=listing_ids)
            .values("listing_id")
            .annotate(n=Count("listing_id"))
        ):
            out[row["listing_id"]][name] = row["n"]
    return out


def card(listing: CommunityListing, username: str) -> dict[str, Any]:
    return {
        "listingId": listing.id,
        "kodyId": listing.kody_id,
        "name": listing.name,
        "owner": username,
        "description": listing.description,
        "category": listing.category,
        "tags": list(listing.tags_json),
        "url": url_of(username, listing.kody_id),
        "path": f"/@{username}/{leaf(listing.kody_id)}",
        "iconUrl": f"/community/icons/{listing.id}",
        "trusted": bool(listing.trusted_commit),
        "featured": listing.featured_at is not None,
        "publishedAt": listing.published_at.isoformat(),
    }


def detail(listing: CommunityListing) -> dict[str, Any]:
    username = usernames([listing.owner_user_id]).get(listing.owner_user_id, "")
    counts = stats([listing.id])[listing.id]
    return {
        **card(listing, username),
        "id": listing.id,
        "status": listing.status,
        "pinnedCommit": listing.pinned_commit,
        "license": listing.license,
        "readme": listing.readme_content,
        "trustedCommit": listing.trusted_commit,
        "ratingSummary": {
            "count": counts["ratingCount"],
            "average": counts["ratingAverage"],
            "adaptationEffortAverage": counts["effortAverage"],
        },
        "starCount": counts["stars"],
        "forkCount": counts["forks"],
    }
