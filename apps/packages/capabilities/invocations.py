"""Invocation tokens: create (the secret shown once) and revoke; list/get live with packages."""

from __future__ import annotations

from typing import Any

from apps.packages.services import invocations
from kody.capabilities import Context, capability

ID = {"type": "string", "minLength": 1, "maxLength": 64}
EXPORT = {"type": "string", "minLength": 1, "maxLength": 255, "pattern": r"^[A-Za-z0-9._-]+$"}


@capability(
    name="packageInvocationTokenCreate",
    domain="packages",
    mutates=True,
    title="Create a package invocation token",
    description=(
        "A token that runs your package's exports over HTTP: POST "
        "/api/v1/packages/<packageId>/exports/<exportName> with `Authorization: Bearer <secret>` "
        "and a JSON body (the arguments); an `Idempotency-Key` header replays the first result. "
        "`exportNames` limits it to those exports (`default` is the package's main export). The "
        "secret is returned now and never again."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "packageId": ID,
            "name": {"type": "string", "minLength": 1, "maxLength": 255},
            "exportNames": {"type": "array", "items": EXPORT, "maxItems": 50},
        },
        "required": ["packageId", "name"],
        "additionalProperties": False,
    },
)
def package_invocation_token_create(
    ctx: Context,
    packageId: str,  # noqa: N803
    name: str,
    exportNames: list[str] | None = None,  # noqa: N803
) -> Any:
    return invocations.create(ctx.user_id, packageId, name, exportNames)


@capability(
    name="packageInvocationTokenRevoke",
    domain="packages",
    mutates=True,
    title="Revoke a package invocation token",
    description="Revoke one of your invocation tokens; calls with it are refused from now on.",
    input_schema={
        "type": "object",
        "properties": {"tokenId": ID},
        "required": ["tokenId"],
        "additionalProperties": False,
    },
)
def package_invocation_token_revoke(ctx: Context, tokenId: str) -> Any:  # noqa: N803
    return {"token": invocations.revoke(ctx.user_id, tokenId)}
