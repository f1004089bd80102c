"""Reporting a listing, and the operators' trust, featuring and activity capabilities."""

from __future__ import annotations

from typing import Any

from apps.community.services import moderation
from kody.capabilities import Context, capability
from kody.capabilities.cursors import cursor_schema

ID = {"type": "string", "minLength": 1, "maxLength": 64}


@capability(
    name="communityReport",
    domain="community",
    mutates=True,
    title="Report a listing",
    description="Tell the moderators what is wrong with a listing (a few reports an hour).",
    input_schema={
        "type": "object",
        "properties": {
            "listingId": ID,
            "reason": {"type": "string", "minLength": 1, "maxLength": 4000},
        },
        "required": ["listingId", "reason"],
        "additionalProperties": False,
    },
)
def community_report(ctx: Context, listingId: str, reason: str) -> Any:  # noqa: N803
    return moderation.report(ctx.user_id, listingId, reason)


@capability(
    name="communitySetTrusted",
    domain="admin",
    role="admin",
    mutates=True,
    title="Trust a listing's commit (operator)",
    description="Mark the listing's pinned commit as reviewed and trusted; commit null clears it.",
    input_schema={
        "type": "object",
        "properties": {"listingId": ID, "commit": {"type": ["string", "null"], "maxLength": 64}},
        "required": ["listingId", "commit"],
        "additionalProperties": False,
    },
)
def community_set_trusted(ctx: Context, listingId: str, commit: str | None) -> Any:  # noqa: N803
    return moderation.set_trusted(listingId, commit, ctx.user_id)


@capability(
    name="communitySetFeatured",
    domain="admin",
    role="admin",
    mutates=True,
    title="Feature a listing (operator)",
    description="Feature or unfeature a listing in browse and search.",
    input_schema={
        "type": "object",
        "properties": {"listingId": ID, "featured": {"type": "boolean"}},
        "required": ["listingId", "featured"],
        "additionalProperties": False,
    },
)
def community_set_featured(ctx: Context, listingId: str, featured: bool) -> Any:  # noqa: N803
    return moderation.set_featured(listingId, featured, ctx.user_id)


@capability(
    name="adminCommunityActivityList",
    domain="admin",
    role="admin",
    title="Community forks and ratings (operator)",
    description=(
        "Forks and ratings newest first: listing identity, actor username, stars. No source, "
        "notes, emails or user ids."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "limit": {"type": "integer", "minimum": 1, "maximum": 100},
            "cursor": cursor_schema(500),
        },
        "additionalProperties": False,
    },
)
def admin_community_activity_list(ctx: Context, limit: int = 50, cursor: str | None = None) -> Any:
    return moderation.activity(limit, cursor)
