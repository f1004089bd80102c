"""Webhook capabilities: mint, rotate, enable, disable, list, and the delivery history.

The ingress URL (with its secret) is answered by mint and rotate only, once; the list never
carries it."""

from __future__ import annotations

from typing import Any

from apps.packages.services import webhooks
from kody.capabilities import Context, capability

ID = {"type": "string", "minLength": 1, "maxLength": 64}
NAME = {"type": "string", "minLength": 1, "maxLength": 100, "pattern": r"^[A-Za-z0-9_.-]+$"}
ONE = {
    "type": "object",
    "properties": {"packageId": ID, "name": NAME},
    "required": ["packageId", "name"],
    "additionalProperties": False,
}
MANY = {"type": "object", "properties": {"packageId": ID}, "additionalProperties": False}


@capability(
    name="webhookUrlMint",
    domain="packages",
    mutates=True,
    title="Mint a webhook URL",
    description=(
        "Mint the ingress URL of a webhook your published package.json declares under "
        "kody.webhooks. POSTs to it run the declared export with {webhook, body, json, headers}. "
        "The URL holds a secret and is shown now only; rotate to replace it."
    ),
    input_schema=ONE,
)
def webhook_url_mint(ctx: Context, packageId: str, name: str) -> Any:  # noqa: N803
    return webhooks.mint(ctx.user, packageId, name)  # type: ignore[arg-type]


@capability(
    name="webhookUrlRotate",
    domain="packages",
    mutates=True,
    title="Rotate a webhook URL",
    description=(
        "Replace a webhook's URL: the old one stops working at once; the new is shown now only."
    ),
    input_schema=ONE,
)
def webhook_url_rotate(ctx: Context, packageId: str, name: str) -> Any:  # noqa: N803
    return webhooks.mint(ctx.user, packageId, name, rotate=True)  # type: ignore[arg-type]


@capability(
    name="webhookEnable",
    domain="packages",
    mutates=True,
    title="Enable a webhook",
    description="Let deliveries to a webhook's URL run again.",
    input_schema=ONE,
)
def webhook_enable(ctx: Context, packageId: str, name: str) -> Any:  # noqa: N803
    return webhooks.set_enabled(ctx.user_id, packageId, name, True)


@capability(
    name="webhookDisable",
    domain="packages",
    mutates=True,
    title="Disable a webhook",
    description="Refuse deliveries to a webhook's URL (404, nothing runs) until enabled again.",
    input_schema=ONE,
)
def webhook_disable(ctx: Context, packageId: str, name: str) -> Any:  # noqa: N803
    return webhooks.set_enabled(ctx.user_id, packageId, name, False)


@capability(
    name="webhookList",
    domain="packages",
    title="List webhooks",
    description="Your webhook endpoints (never their URLs), optionally for one package.",
    input_schema=MANY,
)
def webhook_list(ctx: Context, packageId: str | None = None) -> Any:  # noqa: N803
    return {"webhooks": webhooks.listing(ctx.user_id, packageId)}


@capability(
    name="webhookDeliveryList",
    domain="packages",
    title="List webhook deliveries",
    description="Recent webhook deliveries (their run records), optionally for one package.",
    input_schema=MANY,
)
def webhook_delivery_list(ctx: Context, packageId: str | None = None) -> Any:  # noqa: N803
    return {"deliveries": webhooks.deliveries(ctx.user_id, packageId)}
