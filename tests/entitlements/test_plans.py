from datetime import UTC, datetime, timedelta

import pytest

from apps.entitlements.plans import (
    DAILY_RESOURCES,
    GIB,
    KIB,
    LIMITS,
    MIB,
    PLAN_ORDER,
    RESOURCES,
    Plan,
    effective_plan,
    limit_for,
)
from apps.entitlements.services.plan_cache import cached_plan

NOW = datetime(2026, 8, 20, 12, 0, tzinfo=UTC)


def test_plans_are_ranked_free_standard_pro_max():
    assert [p.value for p in PLAN_ORDER] == ["free", "standard", "pro", "max"]
    assert Plan.FREE.rank < Plan.STANDARD.rank < Plan.PRO.rank < Plan.MAX.rank


def test_every_plan_has_every_limit_and_limits_never_shrink_with_rank():
    for plan in PLAN_ORDER:
        assert set(LIMITS[plan]) == set(RESOURCES)
    for name in RESOURCES:
        values = [LIMITS[p][name] for p in PLAN_ORDER]
        assert values == sorted(values), name


def test_byte_limits_are_exact_binary_integers():
    assert limit_for("free", "storage_bytes") == 16 * 1024 * 1024 == 16 * MIB
    assert limit_for("standard", "storage_bytes") == 1_073_741_824 == GIB
    assert limit_for("pro", "storage_bytes") == 5 * GIB
    assert limit_for("max", "storage_bytes") == 100 * GIB
    assert limit_for("free", "email_message_bytes") == 262_144 == 256 * KIB
    assert limit_for("max", "email_message_bytes") == 768 * KIB
    assert all(isinstance(v, int) for plan in LIMITS.values() for v in plan.values())


@pytest.mark.parametrize(
    ("resource", "values"),
    [
        ("execute_calls_per_day", (250, 5_000, 10_000, 500_000)),
        ("outbound_fetches_per_day", (1_000, 20_000, 40_000, 2_000_000)),
        ("job_runs_per_day", (500, 10_000, 20_000, 1_000_000)),
        ("email_sends_per_day", (10, 200, 500, 10_000)),
        ("email_receives_per_day", (50, 1_000, 2_000, 20_000)),
        ("persistent_package_services", (0, 1, 3, 10)),
        ("repo_sessions", (15, 200, 400, 20_000)),
        ("concurrent_workflows", (2, 50, 100, 5_000)),
    ],
)
def test_limits_match_the_plan_table(resource, values):
    assert tuple(LIMITS[p][resource] for p in PLAN_ORDER) == values


def test_the_five_daily_resources_are_metered():
    assert set(DAILY_RESOURCES) == {
        "execute_calls_per_day",
        "outbound_fetches_per_day",
        "job_runs_per_day",
        "email_sends_per_day",
        "email_receives_per_day",
    }


def test_manual_max_always_wins():
    assert effective_plan("max", "pro", now=NOW) is Plan.MAX
    assert effective_plan("max", None, now=NOW) is Plan.MAX


def test_stripe_standard_beats_manual_free():
    assert effective_plan("free", "standard", now=NOW) is Plan.STANDARD


def test_higher_of_manual_and_stripe_wins():
    assert effective_plan("pro", "standard", now=NOW) is Plan.PRO
    assert effective_plan("standard", "pro", now=NOW) is Plan.PRO


def test_stripe_never_grants_max():
    assert effective_plan("free", "max", now=NOW) is Plan.FREE
    assert effective_plan("standard", "max", now=NOW) is Plan.STANDARD


def test_unexpired_overlay_raises_free_to_standard():
    assert effective_plan("free", None, (NOW + timedelta(days=3), None), now=NOW) is Plan.STANDARD
    assert effective_plan("free", None, (None, NOW + timedelta(hours=1)), now=NOW) is Plan.STANDARD


def test_expired_overlay_leaves_free():
    assert effective_plan("free", None, (NOW - timedelta(seconds=1), None), now=NOW) is Plan.FREE
    assert effective_plan("free", None, (NOW, NOW - timedelta(days=9)), now=NOW) is Plan.FREE


def test_overlay_never_lowers_a_paid_plan():
    assert effective_plan("free", "pro", (NOW + timedelta(days=3),), now=NOW) is Plan.PRO


def test_unknown_values_fall_back_to_free():
    assert effective_plan("", "gold", now=NOW) is Plan.FREE


def test_cached_plan_follows_an_operator_change(owner, django_capture_on_commit_callbacks):
    assert cached_plan(owner.stable_user_id) is Plan.FREE
    with django_capture_on_commit_callbacks(execute=True):
        owner.plan = "pro"
        owner.save()
    assert cached_plan(owner.stable_user_id) is Plan.PRO


def test_cached_plan_follows_a_queryset_update_through_explicit_invalidation(
    owner, django_capture_on_commit_callbacks
):
    from apps.accounts.models import User
    from apps.entitlements.services.plan_cache import invalidate_plan

    assert cached_plan(owner.stable_user_id) is Plan.FREE
    User.objects.filter(pk=owner.pk).update(stripe_plan="standard")
    assert cached_plan(owner.stable_user_id) is Plan.FREE  # cached: no users read
    with django_capture_on_commit_callbacks(execute=True):
        invalidate_plan(owner.stable_user_id)
    assert cached_plan(owner.stable_user_id) is Plan.STANDARD


def test_a_plan_changed_by_another_process_is_seen_within_local_seconds(owner, monkeypatch):
    """Another process's change (the row and a new generation in Redis, nothing forgotten
    here): this process serves its copy until ``LOCAL_SECONDS`` have passed, then reads Redis
    and sees the change; never longer."""
    from django.core.cache import cache

    from apps.accounts.models import User
    from apps.entitlements.services import plan_cache

    now = [5000.0]
    monkeypatch.setattr(plan_cache, "_clock", lambda: now[0])
    assert cached_plan(owner.stable_user_id) is Plan.FREE
    User.objects.filter(pk=owner.pk).update(plan="pro")
    gen_key, _ = plan_cache._keys(owner.stable_user_id)
    cache.set(gen_key, "another-process", plan_cache.GENERATION_TTL_SECONDS)
    now[0] += plan_cache.LOCAL_SECONDS * 0.9
    assert cached_plan(owner.stable_user_id) is Plan.FREE  # this process's copy, no Redis
    now[0] += plan_cache.LOCAL_SECONDS * 0.1
    assert cached_plan(owner.stable_user_id) is Plan.PRO
    assert plan_cache.LOCAL_SECONDS <= 1.0


def test_a_plan_changed_in_this_process_is_seen_at_once(owner, monkeypatch):
    from apps.accounts.models import User
    from apps.entitlements.services import plan_cache

    monkeypatch.setattr(plan_cache, "_clock", lambda: 5000.0)  # the copy never ages
    assert cached_plan(owner.stable_user_id) is Plan.FREE
    User.objects.filter(pk=owner.pk).update(plan="max")
    plan_cache.invalidate_plan_now(owner.stable_user_id)
    assert cached_plan(owner.stable_user_id) is Plan.MAX


def test_a_read_that_began_before_an_invalidation_is_not_remembered(owner, monkeypatch):
    """The Redis layer's generation race, one level up: a reader that loaded the old plan
    just before this process invalidated must not leave it as this process's copy."""
    from apps.accounts.models import User
    from apps.entitlements.services import plan_cache

    monkeypatch.setattr(plan_cache, "_clock", lambda: 5000.0)
    real = plan_cache._redis_plan

    def read_then_change(uid: str) -> Plan:
        plan = real(uid)  # the old plan
        User.objects.filter(pk=owner.pk).update(plan="pro")
        plan_cache.invalidate_plan_now(uid)  # committed elsewhere meanwhile
        return plan

    monkeypatch.setattr(plan_cache, "_redis_plan", read_then_change)
    assert cached_plan(owner.stable_user_id) is Plan.FREE  # what the racing read saw
    monkeypatch.setattr(plan_cache, "_redis_plan", real)
    assert cached_plan(owner.stable_user_id) is Plan.PRO


def test_a_remembered_plan_costs_no_redis_round_trip(owner, monkeypatch):
    from apps.entitlements.services import plan_cache

    assert cached_plan(owner.stable_user_id) is Plan.FREE
    asked = []
    monkeypatch.setattr(plan_cache, "_redis_plan", lambda uid: asked.append(uid) or Plan.MAX)
    for _ in range(20):
        assert cached_plan(owner.stable_user_id) is Plan.FREE
    assert asked == []


def test_cached_plan_for_a_gift_expires_with_the_gift(owner):
    from apps.entitlements.services.plan_cache import _ttl

    expiry = NOW + timedelta(seconds=40)
    assert _ttl(expiry, NOW) == 41
    assert _ttl(None, NOW) == 300
