"""The effective plan, cached in Redis so the metering hot path never reads ``users``.

Design note: a plain delete-on-change cache can be re-poisoned by a reader that loaded the
old row just before the change committed. Each user's cached value therefore carries a
*generation* token; invalidation replaces the token, and a value only counts as a hit when
its token matches the current one. Both keys are read with one MGET.

In front of Redis, each process remembers a plan it read for ``LOCAL_SECONDS`` (1 s): the
runs of one job batch, or a page's several reads, ask Redis once instead of once a call (a
round trip on every ``accountUsage`` and every charge). ``invalidate_plan_now`` forgets the
process's own copy at once, so a change made here is seen here immediately; another process
sees it within ``LOCAL_SECONDS`` (then it reads the new generation from Redis). A gift that
expires is seen at most ``LOCAL_SECONDS`` late (the Redis value's TTL already ends at the
expiry). The copies are bounded (``LOCAL_MAX``, oldest dropped first).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
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


# A plan read from Redis (or the database) serves this process for this long (module docstring).
LOCAL_SECONDS = 1.0
LOCAL_MAX = 10_000
_local: OrderedDict[str, tuple[Plan, float]] = OrderedDict()
_local_lock = threading.Lock()
_clock = time.monotonic
_forgets = [0]  # forget_local calls so far in this process


def _local_get(stable_user_id: str) -> Plan | None:
    with _local_lock:
        found = _local.get(stable_user_id)
        if found is None:
            return None
        if found[1] <= _clock():
            del _local[stable_user_id]
            return None
        return found[0]


def _local_put(stable_user_id: str, plan: Plan, forgets: int) -> None:
    """Remember ``plan`` unless this process forgot plans since the read began (``forgets``):
    a read that loaded the old plan just before an invalidation here must not store it."""
    with _local_lock:
        if _forgets[0] != forgets:
            return
        _local[stable_user_id] = (plan, _clock() + LOCAL_SECONDS)
        _local.move_to_end(stable_user_id)
        while len(_local) > LOCAL_MAX:
            _local.popitem(last=False)


def forget_local(stable_user_id: str | None = None) -> None:
    """Drop this process's copy of one user's plan (all users' with None)."""
    with _local_lock:
        _forgets[0] += 1
        if stable_user_id is None:
            _local.clear()
        else:
            _local.pop(stable_user_id, None)


def cached_plan(stable_user_id: str) -> Plan:
    plan = _local_get(stable_user_id)
    if plan is not None:
        return plan
    forgets = _forgets[0]
    plan = _redis_plan(stable_user_id)
    _local_put(stable_user_id, plan, forgets)
    return plan


def _redis_plan(stable_user_id: str) -> Plan:
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
    forget_local(stable_user_id)
    cache.set(gen_key, uuid.uuid4().hex, GENERATION_TTL_SECONDS)


def invalidate_plan(stable_user_id: str) -> None:
    """Invalidate after the surrounding transaction commits (immediately outside one)."""
    transaction.on_commit(lambda: invalidate_plan_now(stable_user_id))
