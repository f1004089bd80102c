"""Per-user state of entitlements (the original's UserMeter Durable Object)."""

from apps.entitlements.actor.meter import RESOURCES, UnknownResource, UserMeter

__all__ = ["RESOURCES", "UnknownResource", "UserMeter"]
