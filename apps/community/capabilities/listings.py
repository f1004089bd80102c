"""Publishing, reading and finding community listings."""

from __future__ import annotations

from typing import Any

from apps.community.services import listings
from kody.capabilities import Context, capability
from kody.capabilities.cursors import cursor_schema

ID = {"type": "string", "minLength": 1, "maxLength": 64}


@capability(
    name="communityPublish",
    domain="community",
    mutates=True,
    title="Publish a package to the community",
    description=(
        "List one of your packages publicly at its current published commit: readme, "
        "license, tags, category and icon come from that commit. Publishing again moves the "
        "listing to the package's newer published commit."
    ),
    input_schema={
        "type": "object",
        "properties": {"packageId": ID},
        "required": ["packageId"],
        "additionalProperties": False,
    },
)
def community_publish(ctx: Context, packageId: str) -> Any:  # noqa: N803
    return listings.publish(ctx.user, packageId)


@capability(
    name="communityUnpublish",
    domain="community",
    mutates=True,
    title="Take a listing down",
    description="Delist one of your community listings; its page and icon stop answering.",
    input_schema={
        "type": "object",
        "properties": {"listingId": ID},
        "required": ["listingId"],
        "additionalProperties": False,
    },
)
def community_unpublish(ctx: Context, listingId: str) -> Any:  # noqa: N803
    return listings.unpublish(ctx.user_id, listingId)


@capability(
    name="communitySearch",
    domain="community",
    title="Search the community catalog",
    description=(
        "Find public listings by meaning and by text, optionally within a category "
        "(integrations, examples, productivity, apps, utilities, other) or with all the "
        "given tags. Trusted and featured listings rank higher; pass nextCursor back."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "maxLength": 500},
            "category": {
                "type": "string",
                "enum": ["integrations", "examples", "productivity", "apps", "utilities", "other"],
            },
            "tags": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 64},
                "maxItems": 10,
            },
            "limit": {"type": "integer", "minimum": 1, "maximum": 50},
            "cursor": cursor_schema(200),
        },
        "required": ["query"],
        "additionalProperties": False,
    },
)
def community_search(
    ctx: Context,
    query: str,
    category: str | None = None,
    tags: list[str] | None = None,
    limit: int = 20,
    cursor: str | None = None,
) -> Any:
    from apps.community.services.search import search

    return search(query, category=category, tags=tags, limit=limit, cursor=cursor)


@capability(
    name="communityGet",
    domain="community",
    title="Read one community listing",
    description=(
        "A public listing by listingId, or by owner (username) and kodyId (@scope/name or "
        "just name), with its readme, rating summary, star count and fork count."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "listingId": ID,
            "owner": {"type": "string", "minLength": 1, "maxLength": 65},
            "kodyId": {"type": "string", "minLength": 1, "maxLength": 255},
        },
        "oneOf": [{"required": ["listingId"]}, {"required": ["owner", "kodyId"]}],
        "additionalProperties": False,
    },
)
def community_get(
    ctx: Context,
    listingId: str | None = None,  # noqa: N803
    owner: str | None = None,
    kodyId: str | None = None,  # noqa: N803
) -> Any:
    from apps.community.services import reads

    listing = reads.find(ctx.user_id, listingId, owner, kodyId)
    return {"listing": reads.detail(listing)}
