"""The effective plan, cached in Redis so the metering hot path never reads ``users``.

Design note: a plain delete-on-change cache can be re-poisoned by a reader that loaded the
old row just before the change committed. Each user's cached value therefore carries a
*generation* token; invalidation replaces the token, and a value only counts as a hit when
its token matches the current one. Both keys are read with one MGET.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from apps.entitlements.plans import Plan, effective_plan_for, next_overlay_expiry

PLAN_TTL_SECONDS = 300
GENERATION_TTL_SECONDS = 30 * 24 * 3600
_PLAN_FIELDS = (
    "plan",
    "stripe_plan",
    "second_agent_standard_gift_expires_at",
    "referral_standard_credit_expires_at",
)


def _keys(stable_user_id: str) -> tuple[str, str]:
    return (f"entitlements:plan-gen:v1:{stable_user_id}", f"entitlements:plan:v1:{stable_user_id}")


def _generation(gen_key: str, current: str | None) -> str:
    if current:
        return current
    cache.add(gen_key, uuid.uuid4().hex, GENERATION_TTL_SECONDS)
    return str(cache.get(gen_key))


def _ttl(expiry: datetime | None, now: datetime) -> int:
    if expiry is None:
        return PLAN_TTL_SECONDS
    return max(1, min(PLAN_TTL_SECONDS, int((expiry - now).total_seconds()) + 1))


def load_plan(stable_user_id: str, *, now: datetime | None = None) -> tuple[Plan, datetime | None]:
    from apps.accounts.models import User

    now = now or timezone.now()
    user = User.objects.only(*_PLAN_FIELDS).get(stable_user_id=stable_user_id)
    return effective_plan_for(user, now=now), next_overlay_expiry(user, now=now)


def cached_plan(stable_user_id: str) -> Plan:
    gen_key, value_key = _keys(stable_user_id)
    found = cache.get_many([gen_key, value_key])
    generation = _generation(gen_key, found.get(gen_key))
    value = found.get(value_key)
    if value and value[0] == generation:
        return Plan(value[1])
    now = timezone.now()
    plan, expiry = load_plan(stable_user_id, now=now)
    cache.set(value_key, (generation, plan.value), _ttl(expiry, now))
    return plan


def invalidate_plan_now(stable_user_id: str) -> None:
    gen_key, _ = _keys(stable_user_id)
    cache.set(gen_key, uuid.uuid4().hex, GENERATION_TTL_SECONDS)


def invalidate_plan(stable_user_id: str) -> None:
    """Invalidate after the surrounding transaction commits (immediately outside one)."""
    transaction.on_commit(lambda: invalidate_plan_now(stable_user_id))
