"""Package capabilities (domain ``packages``): save and publish, read, remotes, tokens."""

from __future__ import annotations

from typing import Any

from apps.packages.services import packages
from kody.capabilities import Context, capability
from kody.capabilities.cursors import cursor_schema

ID = {"type": "string", "minLength": 1, "maxLength": 64}
BY_PACKAGE = {
    "type": "object",
    "properties": {"packageId": ID},
    "required": ["packageId"],
    "additionalProperties": False,
}
FILE_PATH_PATTERN = r"^(?!(?:.*/)?(?:\.|\.\.|\.git)(?:/|$))[^/]+(?:/[^/]+)*$"
PAGE = {
    "limit": {"type": "integer", "minimum": 1, "maximum": 100},
    "cursor": cursor_schema(1000),
}


@capability(
    name="packageSave",
    domain="packages",
    mutates=True,
    title="Save and publish a package",
    description=(
        "Create a package from files (path -> UTF-8 text), or update one with packageId, and "
        "publish it. Needs package.json (name @your-username/name, exports, kody metadata) and "
        "README.md. Checks (manifest, docs, kody:@ imports, deno check, lint, bundle) run "
        "first; if any fails nothing changes and every failed check is returned."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "files": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                # The rules ``services.packages`` enforces on paths: relative, no empty,
                # '.', '..' or '.git' segment. (A missing package.json or README.md is a
                # failed check, reported with the others, not a schema error.)
                "propertyNames": {"pattern": FILE_PATH_PATTERN},
                "minProperties": 1,
                "maxProperties": 1000,
            },
            "packageId": ID,
        },
        "required": ["files"],
        "additionalProperties": False,
    },
)
def package_save(ctx: Context, files: dict[str, str], packageId: str | None = None) -> Any:  # noqa: N803
    return packages.save(ctx.user, files, packageId)


@capability(
    name="packageGet",
    domain="packages",
    title="Read one package",
    description="One of your packages by packageId or by name (@scope/name).",
    input_schema={
        "type": "object",
        "properties": {
            "packageId": ID,
            "name": {"type": "string", "minLength": 1, "maxLength": 255},
        },
        "oneOf": [{"required": ["packageId"]}, {"required": ["name"]}],
        "additionalProperties": False,
    },
)
def package_get(ctx: Context, packageId: str | None = None, name: str | None = None) -> Any:  # noqa: N803
    package = packages.owned(ctx.user_id, packageId, name)
    source = packages.source_of(package)
    return {"package": {**packages.to_json(package, source), "head": packages.head_of(source)}}


@capability(
    name="packageList",
    domain="packages",
    title="List packages",
    description="Your packages by name, optionally filtered by a query; pass nextCursor back.",
    input_schema={
        "type": "object",
        "properties": {"query": {"type": "string", "maxLength": 200}, **PAGE},
        "additionalProperties": False,
    },
)
def package_list(
    ctx: Context, query: str | None = None, limit: int = 50, cursor: str | None = None
) -> Any:
    return packages.list_page(ctx.user_id, query=query, limit=limit, cursor=cursor)


@capability(
    name="packageUpdate",
    domain="packages",
    mutates=True,
    title="Change a package's settings",
    description=(
        "hidden (left out of ranked search only), isPrivate (repo visibility), locked (agents "
        "and reconcile may not publish until the owner approves a commit in the account UI)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "packageId": ID,
            "hidden": {"type": "boolean"},
            "isPrivate": {"type": "boolean"},
            "locked": {"type": "boolean"},
        },
        "required": ["packageId"],
        "additionalProperties": False,
    },
)
def package_update(
    ctx: Context,
    packageId: str,  # noqa: N803
    hidden: bool | None = None,
    isPrivate: bool | None = None,  # noqa: N803
    locked: bool | None = None,
) -> Any:
    if locked is False:
        # Unlocking is the owner's approval, given in the account UI only.
        from kody.errors import Forbidden

        raise Forbidden("Only the owner can unlock a package, at /account/packages.")
    package = packages.update(
        ctx.user_id, packageId, hidden=hidden, is_private=isPrivate, locked=locked
    )
    return {"package": packages.to_json(package)}


@capability(
    name="packageDelete",
    domain="packages",
    mutates=True,
    title="Delete a package",
    description="Delete a package with its repo, snapshots, bundles and search entry.",
    input_schema=BY_PACKAGE,
)
def package_delete(ctx: Context, packageId: str) -> Any:  # noqa: N803
    packages.delete(ctx.user_id, packageId)
    return {"deleted": True, "id": packageId}


@capability(
    name="packageGetGitRemote",
    domain="packages",
    mutates=True,
    title="Get a git remote for a package",
    description=(
        "A git remote and a one-hour token (read, or write to push) for a package's repo, with "
        "the git commands to clone it. After pushing, call packagePublishExternalPush."
    ),
    input_schema={
        "type": "object",
        "properties": {"packageId": ID, "access": {"type": "string", "enum": ["read", "write"]}},
        "required": ["packageId"],
        "additionalProperties": False,
    },
)
def package_get_git_remote(ctx: Context, packageId: str, access: str = "read") -> Any:  # noqa: N803
    return packages.git_remote(ctx.user, packageId, access)


@capability(
    name="packagePublishExternalPush",
    domain="packages",
    mutates=True,
    title="Publish what was pushed",
    description=(
        "Publish the package's default-branch HEAD after a git push: checks first; a "
        "non-fast-forward is rejected unless allowForce."
    ),
    input_schema={
        "type": "object",
        "properties": {"packageId": ID, "allowForce": {"type": "boolean"}},
        "required": ["packageId"],
        "additionalProperties": False,
    },
)
def package_publish_external_push(ctx: Context, packageId: str, allowForce: bool = False) -> Any:  # noqa: N803
    return packages.publish_external_push(ctx.user, packageId, allow_force=allowForce).as_json()


@capability(
    name="packageSubscriptionsList",
    domain="packages",
    title="List package push subscriptions",
    description="The push subscriptions of your package sources.",
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
)
def package_subscriptions_list(ctx: Context) -> Any:
    from apps.packages.models import EntitySourceArtifactsPushSubscription as Sub

    rows = Sub.objects.filter(user_id=ctx.user_id).order_by("created_at")[:200]
    return {
        "subscriptions": [
            {
                "sourceId": r.source_id,
                "subscriptionId": r.subscription_id,
                "createdAt": r.created_at.isoformat(),
            }
            for r in rows
        ]
    }


@capability(
    name="packageInvocationTokenList",
    domain="packages",
    title="List package invocation tokens",
    description="Your package invocation tokens (never their secrets), optionally for one package.",
    input_schema={
        "type": "object",
        "properties": {"packageId": ID},
        "additionalProperties": False,
    },
)
def package_invocation_token_list(ctx: Context, packageId: str | None = None) -> Any:  # noqa: N803
    return {"tokens": packages.invocation_tokens(ctx.user_id, packageId)}


@capability(
    name="packageInvocationTokenGet",
    domain="packages",
    title="Read one package invocation token",
    description="One of your package invocation tokens by id (never its secret).",
    input_schema={
        "type": "object",
        "properties": {"tokenId": ID},
        "required": ["tokenId"],
        "additionalProperties": False,
    },
)
def package_invocation_token_get(ctx: Context, tokenId: str) -> Any:  # noqa: N803
    return {"token": packages.invocation_token(ctx.user_id, tokenId)}
