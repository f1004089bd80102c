"""Per-user state of entitlements: the UserMeter and the StripePlanRefresh alarm."""

from apps.accounts.actor_surfaces import ActorSurface, register_actor
from apps.entitlements.actor import upgrades as _upgrades  # noqa: F401  (registers steps)
from apps.entitlements.actor.meter import RESOURCES, USER_METER_VERSION, UnknownResource, UserMeter
from apps.entitlements.actor.stripe_refresh import StripePlanRefresh

register_actor(
    ActorSurface(
        UserMeter.name,
        purge="purge",
        export_pages="export_counters",
        export_section="user_meter",
        import_note="usage counters and leases belong to the old instance's billing days",
        note="daily counters, inbound claims, storage bytes, service liveness; "
        "purge keeps the deletion tombstone",
    )
)
register_actor(
    ActorSurface(
        StripePlanRefresh.name,
        purge="cancel",
        export_pages=None,
        export_section=None,
        note="holds only a one-shot alarm, nothing a person owns",
    )
)

__all__ = ["RESOURCES", "USER_METER_VERSION", "StripePlanRefresh", "UnknownResource", "UserMeter"]
