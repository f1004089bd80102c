"""Entitlements operations other apps call.

Hot path (one UserMeter call, plan from the Redis cache, no shared-table write; a charge's
usage event goes to a Redis buffer the hourly rollup drains into ``usage_events``):

* ``consume(user, resource, n=1, key=...) -> Charge`` charges a daily resource or raises
  ``LimitReached`` (code ``limit_reached``, HTTP 429, details ``resource``, ``limit``,
  ``plan``, ``used``, ``resets_at``) without charging. Pass a deterministic ``key`` naming
  the charge (a request or job id): after an ``ActorCallTimeout`` the same call with the
  same key charges at most once.
* ``assert_within(user, resource, n=1)`` checks any limit without charging.
* ``count_limit(user, resource)``: a count limit (jobs, secrets, saved packages, …) held
  atomically around the insert — see ``count_limits``; every writer of a counted resource
  uses it instead of ``assert_within``.
* ``consume_in_call(context, resource)``: the same charge from inside one of the user's own
  actor calls, in that call's transaction (the JobManager charges ``job_runs_per_day`` with
  its claim).
* ``refund``, ``consume_inbound_delivery`` (charged once per delivery id),
  ``reserve_storage_bytes`` (``reserve_storage_bytes_in_call`` from inside the user's own
  actor call, in its transaction).

``user`` is a ``User`` or a stable user id. Account UI: ``usage_summary(user)``.
"""

from apps.entitlements.services.count_limits import CountSlot, count_limit
from apps.entitlements.services.enforcement import (
    Charge,
    LimitReached,
    NotMetered,
    assert_within,
    consume,
    consume_in_call,
    consume_inbound_delivery,
    refund,
    release_storage_bytes,
    reserve_storage_bytes,
    reserve_storage_bytes_in_call,
)
from apps.entitlements.services.plan_cache import cached_plan, invalidate_plan
from apps.entitlements.services.summary import usage_summary, usage_summary_json
from apps.entitlements.services.usage import record_usage


def plan_of(user: object) -> str:
    return cached_plan(getattr(user, "stable_user_id", user)).value  # type: ignore[arg-type]


__all__ = [
    "Charge",
    "CountSlot",
    "LimitReached",
    "NotMetered",
    "assert_within",
    "cached_plan",
    "consume",
    "consume_in_call",
    "consume_inbound_delivery",
    "count_limit",
    "invalidate_plan",
    "plan_of",
    "record_usage",
    "refund",
    "release_storage_bytes",
    "reserve_storage_bytes",
    "reserve_storage_bytes_in_call",
    "usage_summary",
    "usage_summary_json",
]
