"""Integration capabilities: OAuth connections to other services, the apps behind them and
the provider registry. No reply carries a token or client secret — only the names of the
secrets that hold them (what a package writes as ``{{secret:…}}``)."""

from __future__ import annotations

from typing import Any

from apps.packages.services.integrations import (
    connections,
    flow,
    oauth_apps,
    platform_apps,
    registry,
    rules,
)
from kody.capabilities import Context, capability
from kody.capabilities.secrecy import SECRET

NAME = {
    "type": "string",
    "minLength": 1,
    "maxLength": 64,
    "pattern": r"^[A-Za-z0-9][A-Za-z0-9_-]*$",
}
SLUG = {"type": "string", "minLength": 1, "maxLength": 64, "pattern": r"^[a-z0-9][a-z0-9_-]*$"}
URL = {"type": "string", "minLength": 1, "maxLength": 2048}
STRINGS = {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 253}}
CLIENT_SECRET = {
    "type": "string",
    "minLength": 1,
    "maxLength": 4096,
    "description": "Stored encrypted; never shown again.",
    SECRET: True,
}
APP = {
    "type": "object",
    "description": "Your own OAuth app at the provider, created or updated with this call.",
    "properties": {
        "slug": SLUG,
        "provider": {"type": "string", "maxLength": 128},
        "label": {"type": "string", "maxLength": 255},
        "clientId": {"type": "string", "minLength": 1, "maxLength": 512},
        "clientSecret": CLIENT_SECRET,
        "authorizeUrl": URL,
        "tokenUrl": URL,
        "apiBaseUrl": URL,
        "flow": {"type": "string", "enum": ["pkce", "confidential"]},
        "usePkce": {"type": "boolean"},
        "tokenExchangeStyle": {"type": "string", "enum": ["form", "basic-form", "basic-json"]},
        "scopeSeparator": {"type": "string", "enum": [" ", ",", "+", ";"]},
        "extraAuthorizeParams": {
            "type": "object",
            "maxProperties": 20,
            "additionalProperties": {"type": "string", "maxLength": 500},
        },
    },
    "required": ["slug", "clientId", "authorizeUrl", "tokenUrl"],
    "additionalProperties": False,
}
BY_NAME = {
    "type": "object",
    "properties": {"name": NAME},
    "required": ["name"],
    "additionalProperties": False,
}


@capability(
    name="integrationSave",
    domain="integrations",
    mutates=True,
    title="Connect a service with OAuth",
    description=(
        "Create (or reconnect) the integration `name` through exactly one app: your own "
        "(`appSlug`, or `app` to create/update it in the same call) or an enabled platform app "
        "(`platformAppSlug`). Returns `authorizeUrl`: the user opens it while signed in to "
        "Kody, approves at the provider, and the tokens are stored as secrets usable only for "
        "`requiredHosts` (default: the platform app's hosts or the app's API host)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "name": NAME,
            "appSlug": SLUG,
            "platformAppSlug": SLUG,
            "app": APP,
            "scopes": {**STRINGS, "maxItems": 100},
            "requiredHosts": {**STRINGS, "maxItems": 20},
            "accountLabel": {"type": "string", "maxLength": 255},
            "description": {"type": "string", "maxLength": 2000},
            "allowedPackages": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 64},
                "maxItems": 100,
                "description": (
                    "Saved packages granted the tokens (besides your own packages in "
                    "own-packages mode). A package added here is granted when you authorize; "
                    "one left out loses the tokens at once."
                ),
            },
            "usageMode": {
                "type": "string",
                "enum": list(rules.USAGE_MODES),
                "description": (
                    "own-packages (default): your own code and packages plus allowedPackages; "
                    "allowed-packages: only the packages in allowedPackages."
                ),
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    },
)
def integration_save(ctx: Context, **fields: Any) -> dict[str, Any]:
    planned = connections.plan(ctx.user_id, fields)
    row = connections.write(ctx.user_id, planned, fields.get("app"))
    started = flow.begin(ctx.user_id, row, connections.app_of(ctx.user_id, row))
    return {
        "integration": connections.view(ctx.user_id, started.integration),
        "authorizeUrl": started.authorize_url,
        "authorizeExpiresInSeconds": flow.STATE_TTL_SECONDS,
    }


@capability(
    name="integrationGet",
    domain="integrations",
    title="One integration",
    description="One integration: app, scopes, required hosts, status and token secret names.",
    input_schema=BY_NAME,
)
def integration_get(ctx: Context, name: str) -> dict[str, Any]:
    row = connections.get(ctx.user_id, name)
    return {"integration": connections.view(ctx.user_id, row)}


@capability(
    name="integrationList",
    domain="integrations",
    title="List integrations",
    description="Your integrations, connected and pending.",
)
def integration_list(ctx: Context) -> dict[str, Any]:
    rows = connections.list_rows(ctx.user_id)
    return {"integrations": [connections.view(ctx.user_id, r) for r in rows]}


@capability(
    name="integrationDelete",
    domain="integrations",
    mutates=True,
    title="Delete an integration",
    description="Delete the integration and its stored tokens.",
    input_schema=BY_NAME,
)
def integration_delete(ctx: Context, name: str) -> dict[str, Any]:
    connections.delete(ctx.user_id, name)
    return {"deleted": True, "name": name}


@capability(
    name="integrationTokenRefresh",
    domain="integrations",
    mutates=True,
    title="Refresh an integration's token",
    description=(
        "Exchange the stored refresh token for a new access token. Concurrent calls share one "
        "refresh: `refreshed` is true only for the call that spent the refresh token."
    ),
    input_schema=BY_NAME,
)
def integration_token_refresh(ctx: Context, name: str) -> dict[str, Any]:
    row, refreshed = flow.refresh(ctx.user_id, name)
    return {"integration": connections.view(ctx.user_id, row), "refreshed": refreshed}


@capability(
    name="integrationDiscover",
    domain="integrations",
    title="Discover a provider's OAuth endpoints",
    description=(
        "For a provider name or host, the registry entry that knows it; for a URL, also the "
        "provider's published OAuth metadata (RFC 8414). `app` is a draft for integrationSave "
        "(add your clientId/clientSecret)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "provider": {"type": "string", "minLength": 1, "maxLength": 253},
            "url": URL,
        },
        "anyOf": [{"required": ["provider"]}, {"required": ["url"]}],
        "additionalProperties": False,
    },
)
def integration_discover(
    ctx: Context, provider: str | None = None, url: str | None = None
) -> dict[str, Any]:
    return registry.discover(url or provider or "")


@capability(
    name="integrationRegistrySearch",
    domain="integrations",
    title="Search known providers",
    description="Search the curated registry of OAuth providers Kody knows (endpoints, marks).",
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "maxLength": 200},
            "limit": {"type": "integer", "minimum": 1, "maximum": registry.MAX_RESULTS},
        },
        "additionalProperties": False,
    },
)
def integration_registry_search(
    ctx: Context, query: str = "", limit: int = registry.MAX_RESULTS
) -> dict[str, Any]:
    return {"providers": registry.search(query, limit)}


@capability(
    name="integrationOauthAppList",
    domain="integrations",
    title="List your OAuth apps",
    description="Your own OAuth apps (client ids and endpoints; client secrets are never shown).",
)
def integration_oauth_app_list(ctx: Context) -> dict[str, Any]:
    return {"apps": [oauth_apps.view(a) for a in oauth_apps.list_apps(ctx.user_id)]}


@capability(
    name="integrationOauthAppRotateCredentials",
    domain="integrations",
    mutates=True,
    title="Rotate an OAuth app's credentials",
    description=(
        "Replace your OAuth app's client id and/or client secret. Connections keep their "
        "tokens; the new credentials are used from the next token request."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "appSlug": SLUG,
            "clientId": {"type": "string", "minLength": 1, "maxLength": 512},
            "clientSecret": CLIENT_SECRET,
        },
        "required": ["appSlug"],
        "anyOf": [{"required": ["clientId"]}, {"required": ["clientSecret"]}],
        "additionalProperties": False,
    },
)
def integration_oauth_app_rotate_credentials(
    ctx: Context,
    appSlug: str,  # noqa: N803
    clientId: str | None = None,  # noqa: N803
    clientSecret: str | None = None,  # noqa: N803
) -> dict[str, Any]:
    app = oauth_apps.rotate_credentials(
        ctx.user_id, appSlug, client_id=clientId, client_secret=clientSecret
    )
    return {"app": oauth_apps.view(app)}


@capability(
    name="integrationPlatformAppList",
    domain="integrations",
    title="List Kody's platform apps",
    description="OAuth apps Kody operates that you can connect with (enabled ones only).",
)
def integration_platform_app_list(ctx: Context) -> dict[str, Any]:
    return {"apps": [platform_apps.view(a) for a in platform_apps.list_enabled()]}
