"""Secret capabilities. They write and list secrets; none of them ever returns a value.

``secretSet``'s ``value`` is typed and bounded in its schema so that clients see the rule; a
schema error on a property marked ``"x-kody-secret": true`` is reported without quoting the
input (``kody.capabilities.invoke``). The items of ``secrets`` stay untyped and are checked
here, with messages that never include a value. A job whose target would carry a secret is
refused (``kody.capabilities.secrecy``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.utils.dateparse import parse_datetime

from apps.packages.services import secrets as service
from apps.packages.services import signing
from kody.capabilities import Context, capability
from kody.capabilities.secrecy import SECRET
from kody.errors import InvalidInput

MAX_VALUE_CHARS = 16384
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,255}$")
MAX_BATCH = 50
NAME = {"type": "string", "minLength": 1, "maxLength": 255, "pattern": r"^[A-Za-z0-9_.-]+$"}
HOSTS = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": 253},
    "maxItems": 50,
    "description": "Hosts the secret may be sent to; none means no host.",
}
WHERE = {
    "scope": {"type": "string", "enum": ["user", "package", "session"]},
    "bindingKey": {
        "type": "string",
        "minLength": 1,
        "maxLength": 255,
        "description": "The saved package id (scope package) or session id (scope session).",
    },
}
ENTRY_FIELDS = {"name", "value", "description", "allowedHosts", "expiresAt"}


# A user-scoped bucket has no binding key; a package or session bucket needs one. Said in the
# schema (scope defaults to user) so that a schema-valid call is never refused for it.
BINDING_RULE = {
    "if": {"properties": {"scope": {"const": "user"}}},
    "then": {
        "not": {"required": ["bindingKey"]},
        "description": "A user-scoped secret takes no bindingKey.",
    },
    "else": {"required": ["bindingKey"]},
}


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {**properties, **WHERE},
        "required": required,
        "additionalProperties": False,
        **BINDING_RULE,
    }


def _entry(raw: Any, where: str) -> service.NewSecret:
    if not isinstance(raw, dict) or not set(raw) <= ENTRY_FIELDS:
        raise InvalidInput(
            f"{where} must be an object with only {sorted(ENTRY_FIELDS)}.",
            details={"path": where},
        )
    name, value = raw.get("name"), raw.get("value")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise InvalidInput(
            f"{where}.name must be 1-255 letters, digits, '_', '.' or '-'.",
            details={"path": where},
        )
    if not isinstance(value, str) or not value or len(value) > MAX_VALUE_CHARS:
        raise InvalidInput(
            f"{where}.value must be a non-empty string of at most {MAX_VALUE_CHARS} characters.",
            details={"path": where, "name": name},
        )
    hosts = raw.get("allowedHosts")
    if hosts is not None and (
        not isinstance(hosts, list) or not all(isinstance(h, str) and h for h in hosts)
    ):
        raise InvalidInput(f"{where}.allowedHosts must be a list of hosts.", details={"name": name})
    return service.NewSecret(
        name=name,
        value=value,
        description=str(raw.get("description") or "")[:1000],
        allowed_hosts=hosts,
        expires_at=_when(raw.get("expiresAt"), name),
    )


def _when(raw: Any, name: str) -> datetime | None:
    if raw is None:
        return None
    parsed = parse_datetime(raw) if isinstance(raw, str) else None
    if parsed is None:
        raise InvalidInput("expiresAt must be an ISO 8601 date-time.", details={"name": name})
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@capability(
    name="secretSet",
    domain="secrets",
    mutates=True,
    title="Save a secret",
    description=(
        "Save (or replace) one encrypted secret. The value is never shown again: not by "
        "secretList, not on the account page. allowedHosts lists where it may be sent; "
        "granting packages is done by the user on /account/secrets."
    ),
    input_schema=_schema(
        {
            "name": NAME,
            "value": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_VALUE_CHARS,
                "description": "The secret.",
                SECRET: True,
            },
            "description": {"type": "string", "maxLength": 1000},
            "allowedHosts": HOSTS,
            "expiresAt": {"type": "string", "format": "date-time"},
        },
        ["name", "value"],
    ),
)
def secret_set(
    ctx: Context,
    scope: str = "user",
    bindingKey: str | None = None,  # noqa: N803
    **fields: Any,
) -> dict[str, Any]:
    [saved] = service.set_many(
        ctx.user_id, [_entry(fields, "input")], scope=scope, binding_key=bindingKey
    )
    return {"secret": saved}


@capability(
    name="secretSetMany",
    domain="secrets",
    mutates=True,
    title="Save several secrets",
    description="Save up to 50 secrets in one bucket at once: all are saved, or none.",
    input_schema=_schema(
        {
            "secrets": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_BATCH,
                # No "type" on the items: only the mark, so no schema error quotes an item.
                "items": {"properties": {"value": {SECRET: True}}},
            }
        },
        ["secrets"],
    ),
)
def secret_set_many(
    ctx: Context,
    secrets: list[Any],
    scope: str = "user",
    bindingKey: str | None = None,  # noqa: N803
) -> dict[str, Any]:
    entries = [_entry(raw, f"secrets[{i}]") for i, raw in enumerate(secrets)]
    saved = service.set_many(ctx.user_id, entries, scope=scope, binding_key=bindingKey)
    return {"secrets": saved}


@capability(
    name="secretList",
    domain="secrets",
    title="List secrets",
    description="Names, descriptions, grants and expiry of the user's secrets — never values.",
    input_schema=_schema({}, []),
)
def secret_list(
    ctx: Context,
    scope: str | None = None,
    bindingKey: str | None = None,  # noqa: N803
) -> dict[str, Any]:
    return {"secrets": service.list_secrets(ctx.user_id, scope=scope, binding_key=bindingKey)}


@capability(
    name="secretDelete",
    domain="secrets",
    mutates=True,
    title="Delete a secret",
    description="Delete one secret.",
    input_schema=_schema({"name": NAME}, ["name"]),
)
def secret_delete(
    ctx: Context,
    name: str,
    scope: str = "user",
    bindingKey: str | None = None,  # noqa: N803
) -> dict[str, Any]:
    service.delete_secret(ctx.user_id, name=name, scope=scope, binding_key=bindingKey)
    return {"deleted": True, "name": name}


@capability(
    name="secretLock",
    domain="secrets",
    title="Ask the user to grant a secret to a package",
    description=(
        "Returns the URL where the user approves letting one of their saved packages use one "
        "of their user secrets. It changes no grant: only the user can, on that page."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "name": NAME,
            "packageId": {"type": "string", "minLength": 1, "maxLength": 64},
        },
        "required": ["name", "packageId"],
        "additionalProperties": False,
    },
)
def secret_lock(ctx: Context, name: str, packageId: str) -> dict[str, Any]:  # noqa: N803
    request = service.grant_request(ctx.user_id, name, packageId)
    return {
        "name": name,
        "packageId": packageId,
        "granted": request.granted,
        "approvalUrl": settings.SITE_URL.rstrip("/") + service.approval_path(name, packageId),
    }


@capability(
    name="secretJwtSign",
    domain="secrets",
    title="Sign a JWT with a stored secret",
    description=(
        "Sign `claims` as a JWT with one of your saved (user-scoped) secrets as the key — "
        "HS256/384/512 use it as the HMAC key, RS*/ES* need a PEM private key. The secret "
        "is never revealed; only the signed token is returned."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "secretName": {"type": "string", "minLength": 1, "maxLength": 255},
            "claims": {"type": "object", "maxProperties": 100},
            "alg": {"type": "string", "enum": list(signing.ALGORITHMS)},
        },
        "required": ["secretName", "claims"],
        "additionalProperties": False,
    },
)
def secret_jwt_sign(
    ctx: Context,
    secretName: str,  # noqa: N803
    claims: dict[str, Any],
    alg: str = "HS256",
) -> dict[str, Any]:
    return {"jwt": signing.sign(ctx.user_id, secretName, claims, alg), "alg": alg}
