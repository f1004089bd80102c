"""Per-user state of entitlements: the UserMeter and the StripePlanRefresh alarm."""

from apps.entitlements.actor import upgrades as _upgrades  # noqa: F401  (registers steps)
from apps.entitlements.actor.meter import RESOURCES, USER_METER_VERSION, UnknownResource, UserMeter
from apps.entitlements.actor.stripe_refresh import StripePlanRefresh

__all__ = ["RESOURCES", "USER_METER_VERSION", "StripePlanRefresh", "UnknownResource", "UserMeter"]
