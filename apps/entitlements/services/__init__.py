"""Entitlements operations other apps call (enforcement, usage, plans, billing).

Enforcement (hot path): ``consume(user, resource, n=1)`` and ``assert_within(user, resource)``
raise ``LimitReached`` (code ``limit_reached``, HTTP 429, details ``resource``, ``limit``,
``plan``, ``resets_at``). Account UI: ``usage_summary(user)``.
"""

from apps.entitlements.services.plan_cache import cached_plan, invalidate_plan
from apps.entitlements.services.usage import record_usage


def plan_of(user: object) -> str:
    return cached_plan(user.stable_user_id).value  # type: ignore[attr-defined]


__all__ = ["cached_plan", "invalidate_plan", "plan_of", "record_usage"]
