"""Publishing, reading and finding community listings."""

from __future__ import annotations

from typing import Any

from apps.community.services import listings
from kody.capabilities import Context, capability

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
