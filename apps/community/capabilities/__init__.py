"""Capabilities of the community domain; each module registers its group on import."""

from apps.community.capabilities import listings, moderation, social

__all__ = ["listings", "moderation", "social"]
