"""Account capabilities served to agents through the API and MCP."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from apps.accounts.models import AccessToken
from apps.accounts.services import tokens
from kody.capabilities import Context, capability
from kody.capabilities.cursors import cursor_schema

WHOAMI_OUTPUT = {
    "type": "object",
    "properties": {
        "userId": {"type": "string", "description": "Stable user id (never changes)."},
        "username": {"type": "string"},
        "email": {"type": "string"},
        "emailVerified": {"type": "boolean"},
        "plan": {"type": "string"},
        "role": {"type": "string", "enum": ["user", "admin"]},
        "token": {
            "type": ["object", "null"],
            "properties": {
                "name": {"type": "string"},
                "kind": {"type": "string"},
                "prefix": {"type": "string"},
            },
        },
    },
    "required": ["userId", "username", "email", "emailVerified", "plan", "role", "token"],
}


@capability(
    name="whoami",
    domain="account",
    title="Who am I",
    description="The account this token acts for: stable user id, username, email and plan.",
    output_schema=WHOAMI_OUTPUT,
    rest=("GET", "whoami"),
)
def whoami(ctx: Context) -> dict[str, Any]:
    user = ctx.user
    token = ctx.token
    return {
        "userId": user.stable_user_id,
        "username": user.username,
        "email": user.email,
        "emailVerified": user.email_verified_at is not None,
        "plan": user.plan,
        "role": "admin" if ctx.is_admin else "user",
        "token": (
            {"name": token.name, "kind": token.kind, "prefix": token.token_prefix}
            if token is not None
            else None
        ),
    }


TOKEN_OUTPUT = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "kind": {"type": "string"},
        "prefix": {"type": "string"},
        "createdAt": {"type": "string", "format": "date-time"},
        "lastUsedAt": {"type": ["string", "null"], "format": "date-time"},
        "expiresAt": {"type": ["string", "null"], "format": "date-time"},
        "revokedAt": {"type": ["string", "null"], "format": "date-time"},
        "current": {"type": "boolean", "description": "True for the token making this call."},
    },
    "required": ["id", "name", "kind", "prefix", "createdAt", "current"],
}


@capability(
    name="accessTokenList",
    domain="account",
    title="List access tokens",
    description="The caller's active access tokens (never their secrets), newest first.",
    output_schema={
        "type": "object",
        "properties": {"tokens": {"type": "array", "items": TOKEN_OUTPUT}},
        "required": ["tokens"],
    },
    rest=("GET", "tokens"),
)
def access_token_list(ctx: Context) -> dict[str, Any]:
    return {"tokens": [_token_view(ctx, t) for t in tokens.list_tokens(ctx.user)]}


@capability(
    name="accessTokenRevoke",
    domain="account",
    title="Revoke an access token",
    description="Revoke one of the caller's access tokens by id. Revoking is idempotent.",
    input_schema={
        "type": "object",
        "properties": {"tokenId": {"type": "integer", "minimum": 1}},
        "required": ["tokenId"],
        "additionalProperties": False,
    },
    output_schema=TOKEN_OUTPUT,
    mutates=True,
)
def access_token_revoke(ctx: Context, tokenId: int) -> dict[str, Any]:  # noqa: N803
    return _token_view(ctx, tokens.revoke_token(ctx.user, tokenId, ip=ctx.ip))


def _token_view(ctx: Context, token: AccessToken) -> dict[str, Any]:
    return {
        "id": token.pk,
        "name": token.name,
        "kind": token.kind,
        "prefix": token.token_prefix,
        "createdAt": _iso(token.created_at),
        "lastUsedAt": _iso(token.last_used_at),
        "expiresAt": _iso(token.expires_at),
        "revokedAt": _iso(token.revoked_at),
        "current": ctx.token is not None and ctx.token.pk == token.pk,
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


EXPORT_SECTION_INPUT = {
    "type": "object",
    "properties": {
        "section": {
            "type": "string",
            "minLength": 1,
            "maxLength": 64,
            "description": (
                "d1_table, r2_object, durable_object_summaries, or an actor section named "
                "in the manifest."
            ),
        },
        "table": {"type": "string", "maxLength": 64, "description": "With section d1_table."},
        "cursor": cursor_schema(4096, nullable=True),
        "limit": {"type": "integer", "minimum": 1, "maximum": 500},
    },
    "required": ["section"],
    "additionalProperties": False,
}


@capability(
    name="accountExportManifest",
    domain="account",
    title="Export manifest",
    description=(
        "What an export of this account contains: every section with its row count, redacted "
        "credential columns, excluded surfaces with reasons, and how to page the sections "
        "with accountExportSection. Secret values are never exported."
    ),
    rest=("GET", "account/export"),
)
def account_export_manifest(ctx: Context) -> dict[str, Any]:
    from apps.accounts.export import service

    return service.manifest(ctx.user)


@capability(
    name="accountExportSection",
    domain="account",
    title="Export one page of a section",
    description=(
        "One page of one export section: rows of a table (section d1_table with table), an "
        "actor's state (its section name), one ≤ 256 KiB base64 chunk of a stored object "
        "(section r2_object), or a summary of every per-user actor (section "
        "durable_object_summaries). Pass nextCursor back until it is null."
    ),
    input_schema=EXPORT_SECTION_INPUT,
    rest=("POST", "account/export/section"),
)
def account_export_section(
    ctx: Context,
    section: str,
    table: str | None = None,
    cursor: str | None = None,
    limit: int = 100,
) -> dict[str, Any]:
    from apps.accounts.export import service

    return service.section(ctx.user, section, table=table, cursor=cursor, limit=limit)


# Operator capabilities live beside their services: account deletion, users and the audit log,
# feature flags.
from apps.accounts import admin_user_capabilities as _admin_user_capabilities  # noqa: E402, F401
from apps.accounts import feedback_capabilities as _feedback_capabilities  # noqa: E402, F401
from apps.accounts import flag_capabilities as _flag_capabilities  # noqa: E402, F401
from apps.accounts import platform_capabilities as _platform_capabilities  # noqa: E402, F401
from apps.accounts import reserved_capabilities as _reserved_capabilities  # noqa: E402, F401
from apps.accounts.deletion import capabilities as _deletion_capabilities  # noqa: E402, F401
