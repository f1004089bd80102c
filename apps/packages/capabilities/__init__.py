"""Capabilities of the packages domain; each module registers its group on import."""

from apps.packages.capabilities import (
    memory,
    meta,
    packages,
    repo_sessions,
    repos,
    search,
    secrets,
    values,
)

__all__ = ["memory", "meta", "packages", "repo_sessions", "repos", "search", "secrets", "values"]
