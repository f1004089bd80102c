"""Repo capabilities (domain ``repos``): plain git repos and their remotes."""

from __future__ import annotations

from typing import Any

from apps.packages.services import packages, repos
from kody.capabilities import Context, capability
from kody.capabilities.cursors import cursor_schema

REPO_ID = {"type": "string", "minLength": 1, "maxLength": 64}
BY_REPO = {
    "type": "object",
    "properties": {"repoId": REPO_ID},
    "required": ["repoId"],
    "additionalProperties": False,
}
ACCESS = {"type": "string", "enum": ["read", "write"]}


def _short(repo_json: dict[str, Any]) -> dict[str, Any]:
    return {k: repo_json[k] for k in ("id", "name", "sourceId", "defaultBranch")}


@capability(
    name="repoCreate",
    domain="repos",
    mutates=True,
    title="Create a git repo",
    description=(
        "Create an empty git repository (default branch main). Clone and push to it with the "
        "remote from repoGetGitRemote; promote it with repoPromoteToPackage."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "minLength": 1,
                "maxLength": 100,
                "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
            },
            "description": {"type": "string", "maxLength": 2000},
        },
        "required": ["name"],
        "additionalProperties": False,
    },
)
def repo_create(ctx: Context, name: str, description: str = "") -> dict[str, Any]:
    repo, source = repos.create(ctx.user_id, name, description)
    return {"repo": _short(repos.to_json(repo, source))}


@capability(
    name="repoGet",
    domain="repos",
    title="Read one repo",
    description="One of your repos by id, with its source id and default branch HEAD.",
    input_schema=BY_REPO,
)
def repo_get(ctx: Context, repoId: str) -> dict[str, Any]:  # noqa: N803
    repo, source = repos.get(ctx.user_id, repoId)
    return {"repo": {**repos.to_json(repo, source), "head": packages.head_of(source)}}


@capability(
    name="repoList",
    domain="repos",
    title="List repos",
    description="Your plain repos by name, a page at a time (pass nextCursor back as cursor).",
    input_schema={
        "type": "object",
        "properties": {
            "limit": {"type": "integer", "minimum": 1, "maximum": 100},
            "cursor": cursor_schema(1000),
        },
        "additionalProperties": False,
    },
)
def repo_list(ctx: Context, limit: int = 50, cursor: str | None = None) -> dict[str, Any]:
    return repos.list_page(ctx.user_id, limit=limit, cursor=cursor)


@capability(
    name="repoDelete",
    domain="repos",
    mutates=True,
    title="Delete a repo",
    description="Delete one of your repos with its whole git history. Cannot be undone.",
    input_schema=BY_REPO,
)
def repo_delete(ctx: Context, repoId: str) -> dict[str, Any]:  # noqa: N803
    repos.delete(ctx.user_id, repoId)
    return {"deleted": True, "id": repoId}


@capability(
    name="repoGetGitRemote",
    domain="repos",
    mutates=True,
    title="Get a git remote for a repo",
    description=(
        "A git remote URL and a one-hour token (read by default, or write) for one repo, with "
        "the exact git commands that clone it with the token and set your author identity."
    ),
    input_schema={
        "type": "object",
        "properties": {"repoId": REPO_ID, "access": ACCESS},
        "required": ["repoId"],
        "additionalProperties": False,
    },
)
def repo_get_git_remote(ctx: Context, repoId: str, access: str = "read") -> dict[str, Any]:  # noqa: N803
    repo, source = repos.get(ctx.user_id, repoId)
    return repos.git_remote(ctx.user, source, access, folder=repo.name)


@capability(
    name="repoPromoteToPackage",
    domain="repos",
    mutates=True,
    title="Turn a repo into a package",
    description=(
        "Make a repo a saved package: its default branch HEAD must hold a valid package.json "
        "(name @your-username/name) and README.md; that commit is published."
    ),
    input_schema=BY_REPO,
)
def repo_promote_to_package(ctx: Context, repoId: str) -> dict[str, Any]:  # noqa: N803
    return packages.promote_repo(ctx.user, repoId)
