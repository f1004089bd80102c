"""Capabilities of the packages domain; each module registers its group on import."""

from apps.packages.capabilities import (
    execute,
    invocations,
    memory,
    packages,
    repos,
    runtime,
    search,
    secrets,
    values,
    webhooks,
)

__all__ = [
    "execute",
    "invocations",
    "memory",
    "packages",
    "repos",
    "runtime",
    "search",
    "secrets",
    "values",
    "webhooks",
]
