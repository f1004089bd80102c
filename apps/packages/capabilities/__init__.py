"""Capabilities of the packages domain; each module registers its group on import."""

from apps.packages.capabilities import (
    execute,
    guide,
    integrations,
    invocations,
    memory,
    meta,
    packages,
    platform_apps,
    repo_sessions,
    repos,
    search,
    secrets,
    values,
    webhooks,
)

__all__ = [
    "execute",
    "guide",
    "integrations",
    "invocations",
    "memory",
    "meta",
    "packages",
    "platform_apps",
    "repo_sessions",
    "repos",
    "search",
    "secrets",
    "values",
    "webhooks",
]
