"""Operator capabilities over package scope grants (``adminPackageScopeGrantCreate/List/
Revoke``): who may act inside a platform account's package scope. Audit-first writes;
replies carry ids, usernames and times only."""

from __future__ import annotations

from typing import Any

from apps.accounts.services import audit
from apps.packages.models import PackageScopeGrant
from apps.packages.services import scope_grants
from kody.capabilities import Context, capability
from kody.errors import InvalidInput

USER_ID = {"type": "string", "minLength": 1, "maxLength": 64}
PAIR = {
    "type": "object",
    "properties": {"scopeOwnerUserId": USER_ID, "granteeUserId": USER_ID},
    "required": ["scopeOwnerUserId", "granteeUserId"],
    "additionalProperties": False,
}


@capability(
    name="adminPackageScopeGrantCreate",
    domain="admin",
    role="admin",
    mutates=True,
    title="Grant a person a platform scope (operator)",
    description=(
        "Let a person account act inside a platform account's package scope. The scope owner "
        "must be a platform account (adminPlatformAccountCreate); the pair is unique."
    ),
    input_schema=PAIR,
)
def admin_package_scope_grant_create(
    ctx: Context,
    scopeOwnerUserId: str,  # noqa: N803
    granteeUserId: str,  # noqa: N803
) -> dict[str, Any]:
    audit.record_intent(ctx, "adminPackageScopeGrantCreate")
    grant = scope_grants.create(scopeOwnerUserId, granteeUserId, by=ctx.user_id)
    return scope_grants.grant_view(grant, scope_grants.usernames([grant]))


@capability(
    name="adminPackageScopeGrantList",
    domain="admin",
    role="admin",
    title="List package scope grants (operator)",
    description=(
        "Scope grants oldest first, optionally for one scope owner and/or one grantee; pass "
        "nextCursor back until it is null."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "scopeOwnerUserId": USER_ID,
            "granteeUserId": USER_ID,
            "limit": {"type": "integer", "minimum": 1, "maximum": 200},
            "cursor": {"type": ["string", "null"], "maxLength": 20},
        },
        "additionalProperties": False,
    },
)
def admin_package_scope_grant_list(
    ctx: Context,
    scopeOwnerUserId: str | None = None,  # noqa: N803
    granteeUserId: str | None = None,  # noqa: N803
    limit: int = 50,
    cursor: str | None = None,
) -> dict[str, Any]:
    rows = PackageScopeGrant.objects.order_by("id")
    if scopeOwnerUserId is not None:
        rows = rows.filter(scope_owner_user_id=scopeOwnerUserId)
    if granteeUserId is not None:
        rows = rows.filter(grantee_user_id=granteeUserId)
    if cursor:
        if not cursor.isdigit():
            raise InvalidInput("The cursor is not one this query returned.")
        rows = rows.filter(id__gt=int(cursor))
    page = list(rows[: limit + 1])
    more, page = len(page) > limit, page[:limit]
    names = scope_grants.usernames(page)
    return {
        "grants": [scope_grants.grant_view(g, names) for g in page],
        "nextCursor": str(page[-1].pk) if more else None,
    }


@capability(
    name="adminPackageScopeGrantRevoke",
    domain="admin",
    role="admin",
    mutates=True,
    title="Revoke a package scope grant (operator)",
    description="Remove a person's grant in a platform account's package scope.",
    input_schema=PAIR,
)
def admin_package_scope_grant_revoke(
    ctx: Context,
    scopeOwnerUserId: str,  # noqa: N803
    granteeUserId: str,  # noqa: N803
) -> dict[str, Any]:
    audit.record_intent(ctx, "adminPackageScopeGrantRevoke")
    scope_grants.revoke(scopeOwnerUserId, granteeUserId)
    return {"revoked": True, "scopeOwnerUserId": scopeOwnerUserId, "granteeUserId": granteeUserId}
