"""Capabilities of the packages domain; each module registers its group on import."""

from apps.packages.capabilities import memory, meta, search, secrets, values

__all__ = ["memory", "meta", "search", "secrets", "values"]
