"""Capabilities of the packages domain; each module registers its group on import."""

from apps.packages.capabilities import (
    execute,
    guide,
    invocations,
    mcp_servers,
    memory,
    meta,
    openapi,
    packages,
    remote_connectors,
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
    "invocations",
    "mcp_servers",
    "memory",
    "meta",
    "openapi",
    "packages",
    "remote_connectors",
    "repo_sessions",
    "repos",
    "search",
    "secrets",
    "values",
    "webhooks",
]
