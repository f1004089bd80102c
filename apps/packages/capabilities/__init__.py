"""Capabilities of the packages domain; each module registers its group on import."""

from apps.packages.capabilities import (
    execute,
    guide,
    invocations,
    memory,
    meta,
    packages,
    repo_sessions,
    repos,
    scope_grants,
    search,
    secrets,
    values,
    webhooks,
)

__all__ = [
    "execute",
    "guide",
    "invocations",
    "memory",
    "meta",
    "packages",
    "repo_sessions",
    "repos",
    "scope_grants",
    "search",
    "secrets",
    "values",
    "webhooks",
]
