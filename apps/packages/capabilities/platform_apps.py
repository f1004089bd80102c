"""Operator capabilities over platform OAuth apps (role admin; audited by the kernel).

The client secret is write-only: replies say whether one is set. ``logo`` takes base64
PNG/JPEG/WebP bytes (fitted to 256 px WebP in ``community_assets``), or '' to remove it.
"""

from __future__ import annotations

from typing import Any

from apps.accounts.services import audit
from apps.packages.services.integrations import platform_apps
from kody.capabilities import Context, capability
from kody.capabilities.secrecy import SECRET

SLUG = {"type": "string", "minLength": 1, "maxLength": 64, "pattern": r"^[a-z0-9][a-z0-9_-]*$"}
URL = {"type": "string", "minLength": 1, "maxLength": 2048}
STRINGS = {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 253}}


@capability(
    name="adminPlatformOauthAppList",
    domain="admin",
    role="admin",
    title="Platform OAuth apps (operator)",
    description="Every platform OAuth app, enabled or not, with its connection count.",
)
def admin_platform_oauth_app_list(ctx: Context) -> dict[str, Any]:
    return {"apps": [platform_apps.admin_view(a) for a in platform_apps.list_all()]}


@capability(
    name="adminPlatformOauthAppSave",
    domain="admin",
    role="admin",
    mutates=True,
    title="Save a platform OAuth app (operator)",
    description=(
        "Create or update a platform OAuth app by slug. A new app needs provider, clientId, "
        "authorizeUrl, tokenUrl and flow; confidential apps need a clientSecret."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "slug": SLUG,
            "provider": {"type": "string", "minLength": 1, "maxLength": 64},
            "label": {"type": "string", "maxLength": 255},
            "description": {"type": "string", "maxLength": 2000},
            "clientId": {"type": "string", "minLength": 1, "maxLength": 512},
            "clientSecret": {"type": "string", "minLength": 1, "maxLength": 4096, SECRET: True},
            "authorizeUrl": URL,
            "tokenUrl": URL,
            "apiBaseUrl": {"type": ["string", "null"], "maxLength": 2048},
            "flow": {"type": "string", "enum": ["pkce", "confidential"]},
            "usePkce": {"type": "boolean"},
            "tokenExchangeStyle": {"type": "string", "enum": ["form", "basic-form", "basic-json"]},
            "scopeSeparator": {"type": "string", "enum": [" ", ",", "+", ";"]},
            "extraAuthorizeParams": {
                "type": "object",
                "maxProperties": 20,
                "additionalProperties": {"type": "string", "maxLength": 500},
            },
            "allowedScopes": {**STRINGS, "maxItems": 100},
            "defaultScopes": {**STRINGS, "maxItems": 100},
            "requiredHosts": {**STRINGS, "maxItems": 20},
            "enabled": {"type": "boolean"},
            "logo": {"type": "string", "maxLength": 3_000_000},
        },
        "required": ["slug"],
        "additionalProperties": False,
    },
)
def admin_platform_oauth_app_save(ctx: Context, **fields: Any) -> dict[str, Any]:
    audit.record_intent(ctx, "adminPlatformOauthAppSave", f"slug={fields['slug']}")
    return {"app": platform_apps.admin_view(platform_apps.save(fields))}


@capability(
    name="adminPlatformOauthAppDelete",
    domain="admin",
    role="admin",
    mutates=True,
    title="Delete a platform OAuth app (operator)",
    description="Delete a platform app no connection uses (otherwise disable it) and its logo.",
    input_schema={
        "type": "object",
        "properties": {"slug": SLUG},
        "required": ["slug"],
        "additionalProperties": False,
    },
)
def admin_platform_oauth_app_delete(ctx: Context, slug: str) -> dict[str, Any]:
    audit.record_intent(ctx, "adminPlatformOauthAppDelete", f"slug={slug}")
    platform_apps.delete(slug)
    return {"deleted": True, "slug": slug}
