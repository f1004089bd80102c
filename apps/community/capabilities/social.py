"""Forks, ratings, stars, follows, the timeline and profiles."""

from __future__ import annotations

from typing import Any

from apps.community.services import forks, social
from kody.capabilities import Context, capability
from kody.capabilities.cursors import cursor_schema

ID = {"type": "string", "minLength": 1, "maxLength": 64}
USERNAME = {"type": "string", "minLength": 1, "maxLength": 65}
PAGE = {
    "limit": {"type": "integer", "minimum": 1, "maximum": 100},
    "cursor": cursor_schema(500),
}


def _obj(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


BY_LISTING = _obj({"listingId": ID}, ["listingId"])
BY_USERNAME = _obj({"username": USERNAME}, ["username"])


@capability(
    name="communityFork",
    domain="community",
    mutates=True,
    title="Fork a community listing",
    description=(
        "Copy a listing's pinned commit into a new package of yours (named targetKodyId, or "
        "the listing's name). The fork is inert: your secrets reach it only through an "
        "explicit grant until you adopt it with communityForkAdopt."
    ),
    input_schema=_obj(
        {"listingId": ID, "targetKodyId": {"type": "string", "minLength": 1, "maxLength": 100}},
        ["listingId"],
    ),
)
def community_fork(ctx: Context, listingId: str, targetKodyId: str | None = None) -> Any:  # noqa: N803
    return forks.fork(ctx.user, listingId, targetKodyId, surface=ctx.surface)


@capability(
    name="communityForkAdopt",
    domain="community",
    mutates=True,
    title="Adopt a fork",
    description=(
        "Treat one of your forks like a package you wrote: it may read and use your secrets "
        "without a per-secret grant (changing secrets from package code still needs one)."
    ),
    input_schema=_obj({"forkId": ID, "note": {"type": "string", "maxLength": 2000}}, ["forkId"]),
)
def community_fork_adopt(ctx: Context, forkId: str, note: str | None = None) -> Any:  # noqa: N803
    return forks.adopt(ctx.user_id, forkId, note)


@capability(
    name="communityRate",
    domain="community",
    mutates=True,
    title="Rate a listing",
    description=(
        "Rate someone else's listing: stars 1-5 and adaptationEffort 1-5 (how much work it "
        "took to make it yours). One rating per listing; rating again replaces it."
    ),
    input_schema=_obj(
        {
            "listingId": ID,
            "stars": {"type": "integer", "minimum": 1, "maximum": 5},
            "adaptationEffort": {"type": "integer", "minimum": 1, "maximum": 5},
            "note": {"type": "string", "maxLength": 2000},
        },
        ["listingId", "stars", "adaptationEffort"],
    ),
)
def community_rate(
    ctx: Context,
    listingId: str,  # noqa: N803
    stars: int,
    adaptationEffort: int,  # noqa: N803
    note: str | None = None,
) -> Any:
    return social.rate(ctx.user_id, listingId, stars, adaptationEffort, note)


@capability(
    name="communityStar",
    domain="community",
    mutates=True,
    title="Star a listing",
    description="Remember a listing in your starred list.",
    input_schema=BY_LISTING,
)
def community_star(ctx: Context, listingId: str) -> Any:  # noqa: N803
    return social.star(ctx.user_id, listingId)


@capability(
    name="communityUnstar",
    domain="community",
    mutates=True,
    title="Unstar a listing",
    description="Remove a listing from your starred list.",
    input_schema=BY_LISTING,
)
def community_unstar(ctx: Context, listingId: str) -> Any:  # noqa: N803
    return social.unstar(ctx.user_id, listingId)


@capability(
    name="communityStarredList",
    domain="community",
    title="Your starred listings",
    description="The listings you starred, newest first; pass nextCursor back.",
    input_schema=_obj(dict(PAGE), []),
)
def community_starred_list(ctx: Context, limit: int = 50, cursor: str | None = None) -> Any:
    return social.starred(ctx.user_id, limit, cursor)


@capability(
    name="communityFollow",
    domain="community",
    mutates=True,
    title="Follow a user",
    description="Follow a user by username; their new and updated listings reach your timeline.",
    input_schema=BY_USERNAME,
)
def community_follow(ctx: Context, username: str) -> Any:
    return social.follow(ctx.user_id, username)


@capability(
    name="communityUnfollow",
    domain="community",
    mutates=True,
    title="Unfollow a user",
    description="Stop following a user.",
    input_schema=BY_USERNAME,
)
def community_unfollow(ctx: Context, username: str) -> Any:
    return social.unfollow(ctx.user_id, username)


@capability(
    name="communityTimeline",
    domain="community",
    title="Your community timeline",
    description="Listings published or updated by people you follow, newest first.",
    input_schema=_obj(dict(PAGE), []),
)
def community_timeline(ctx: Context, limit: int = 50, cursor: str | None = None) -> Any:
    return social.timeline(ctx.user_id, limit, cursor)


@capability(
    name="communityProfileGet",
    domain="community",
    title="A community profile",
    description=(
        "A user's display name, bio, follower counts and public listings (a private profile "
        "shows no listings to others)."
    ),
    input_schema=BY_USERNAME,
)
def community_profile_get(ctx: Context, username: str) -> Any:
    return social.profile(ctx.user_id, username)


@capability(
    name="communityProfileUpdate",
    domain="community",
    mutates=True,
    title="Edit your community profile",
    description="Set your display name, bio, and visibility (public or private).",
    input_schema=_obj(
        {
            "displayName": {"type": "string", "maxLength": 120},
            "bio": {"type": "string", "maxLength": 2000},
            "visibility": {"type": "string", "enum": ["public", "private"]},
        },
        [],
    ),
)
def community_profile_update(
    ctx: Context,
    displayName: str | None = None,  # noqa: N803
    bio: str | None = None,
    visibility: str | None = None,
) -> Any:
    return social.update_profile(ctx.user, displayName, bio, visibility)
