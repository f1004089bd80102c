"""Capabilities of the community domain; each module registers its group on import."""

from apps.community.capabilities import listings, social

__all__ = ["listings", "social"]
