"""Lanes: storage reconciliation, bucket estimates, rollups, retention, the refresh alarm."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.utils import timezone

from apps.entitlements.actor import StripePlanRefresh, UserMeter
from apps.entitlements.models import D1StorageReconcileCursor, StripeWebhookEvent, UsageRollup
from apps.entitlements.services import reconcile, storage, usage
from kody.lanes import registry, run_lane
from kody.userschema.models import UserSchema
from tests.entitlements.factories import StripeWebhookEventFactory, UsageRollupFactory
from tests.packages.factories import McpUserServerInstructionsFactory, UserStorageBucketFactory

pytestmark = pytest.mark.django_db

LANES = {
    "d1_storage_reconciliation": "every_tick",
    "storage_bucket_estimate_backfill": "every_tick",
    "usage_aggregation": "hourly",
    "entitlements_retention": "hourly",
}


def test_lanes_are_registered_with_their_cadence():
    declared = {lane.name: lane.cadence.value for lane in registry.all_lanes()}
    assert {name: declared.get(name) for name in LANES} == LANES


# --- storage reconciliation ---------------------------------------------------------------------


@pytest.fixture
def cursor_at_start() -> None:
    # A row may survive from a lane that a worker ran in an earlier transactional test.
    D1StorageReconcileCursor.objects.update_or_create(singleton=1, defaults={"position": ""})


def test_reconcile_walks_users_in_bounded_slices_and_wraps(
    owner, outsider, operator, cursor_at_start
):
    for user in (owner, outsider, operator):
        McpUserServerInstructionsFactory(user_id=user.stable_user_id, instructions="x" * 100)
    ordered = sorted(u.stable_user_id for u in (owner, outsider, operator))

    first = reconcile.reconcile_next(2)
    assert (first.users, first.wrapped) == (2, False)
    assert D1StorageReconcileCursor.objects.get().position == ordered[1]
    second = reconcile.reconcile_next(2)
    assert (second.users, second.wrapped) == (1, True)
    assert D1StorageReconcileCursor.objects.get().position == ""
    for uid in ordered:
        assert UserMeter.call(uid, "read_storage_bytes")["bytes"] >= 100


def test_reconcile_skips_users_with_nothing_stored_and_no_meter(owner, cursor_at_start):
    reconcile.reconcile_next(10)
    assert not UserSchema.objects.filter(user_id=owner.stable_user_id).exists()


def test_reconcile_corrects_a_drifted_meter(owner):
    UserMeter.call(owner.stable_user_id, "set_storage_bytes", value=123_456)
    assert reconcile.reconcile_user(owner.stable_user_id) is True
    assert UserMeter.call(owner.stable_user_id, "read_storage_bytes")["bytes"] == 0
    assert reconcile.reconcile_user(owner.stable_user_id) is False


def test_a_second_runner_cannot_claim_the_same_slice(owner, outsider, cursor_at_start):
    with mock.patch.object(
        D1StorageReconcileCursor.objects,
        "get_or_create",
        return_value=(D1StorageReconcileCursor(singleton=1, position="stale"), False),
    ):
        assert reconcile.reconcile_next(10).users == 0  # the cursor moved under it


def test_reconcile_lane_runs_and_logs_metrics(owner, caplog):
    caplog.set_level("INFO", logger="kody.lanes")
    run = run_lane("d1_storage_reconciliation")
    assert run is not None and "status=ok" in caplog.text


# --- bucket estimates ---------------------------------------------------------------------------


def test_bucket_estimate_backfill_measures_only_unmeasured_buckets(owner):
    UserStorageBucketFactory(user_id=owner.stable_user_id, storage_id="job:a", kind="job")
    UserStorageBucketFactory(
        user_id=owner.stable_user_id, storage_id="job:b", kind="job", estimated_bytes=5
    )
    UserStorageBucketFactory(user_id=owner.stable_user_id, storage_id="x:c", kind="unknown")
    seen: list[tuple[str, str]] = []
    storage.register_bucket_estimator("job", lambda uid, sid: seen.append((uid, sid)) or 4096)
    try:
        assert storage.backfill_bucket_estimates(batch=10) == 1
    finally:
        storage._ESTIMATORS.pop("job", None)
    assert seen == [(owner.stable_user_id, "job:a")]
    assert storage.bucket_estimate_total(owner.stable_user_id) == 4096 + 5


# --- usage and retention ------------------------------------------------------------------------


def test_usage_aggregation_lane_rolls_up(owner):
    usage.record_usage(owner.stable_user_id, "execute")
    run_lane("usage_aggregation")
    assert UsageRollup.objects.get(user_id=owner.stable_user_id).event_count == 1


def test_retention_lane_prunes_all_three_tables(owner):
    old = timezone.now() - timedelta(days=400)
    StripeWebhookEventFactory(processed_at=timezone.now() - timedelta(days=31))
    usage.record_usage(owner.stable_user_id, "m", at=old)
    usage.drain_buffer()
    UsageRollupFactory(user_id=owner.stable_user_id, month="2020-01")
    run = run_lane("entitlements_retention")
    assert run is not None and run.items == 3
    assert not StripeWebhookEvent.objects.exists() and not UsageRollup.objects.exists()


# --- StripePlanRefresh --------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_checkout_arms_a_one_shot_refresh_alarm_whose_refresh_survives_a_crash(
    owner, django_capture_on_commit_callbacks
):
    from kody import outbox
    from kody.actors.alarms import AlarmClock
    from kody.outbox.models import OutboxMessage

    StripePlanRefresh.call(owner.stable_user_id, "arm", delay_seconds=-3600)
    schema = UserSchema.objects.get(user_id=owner.stable_user_id)
    assert schema.alarm_at is not None and schema.alarm_at <= timezone.now()
    # The worker dies right after the alarm's COMMIT: no on_commit callback ever runs.
    with django_capture_on_commit_callbacks(execute=False):
        fired = AlarmClock.call(owner.stable_user_id, "fire")
    assert fired == ["entitlements.StripePlanRefresh"]
    assert AlarmClock.call(owner.stable_user_id, "fire") == []  # one-shot
    [message] = OutboxMessage.objects.all()  # the refresh committed with the alarm
    assert message.task == "entitlements.refresh_stripe_plan"
    assert message.payload == {"stable_user_id": owner.stable_user_id}
    with mock.patch("apps.entitlements.tasks.refresh_stripe_plan.run") as refresh:
        assert outbox.relay().sent == 1  # whoever relays next runs it
    refresh.assert_called_once_with(stable_user_id=owner.stable_user_id)
    assert not OutboxMessage.objects.exists()


def test_the_refresh_task_rearms_during_a_stripe_outage(owner, stripe_fake):
    from apps.entitlements import tasks

    User = owner.__class__
    User.objects.filter(pk=owner.pk).update(stripe_customer_id=stripe_fake.add_customer()["id"])
    stripe_fake.fail_next = 10
    with mock.patch("apps.entitlements.actor.stripe_refresh.arm_refresh") as rearmed:
        tasks.refresh_stripe_plan(owner.stable_user_id)
    rearmed.assert_called_once_with(owner.stable_user_id, delay_seconds=3600)


def test_the_refresh_task_stores_the_paid_plan(owner, stripe_fake):
    from apps.entitlements import tasks

    customer = stripe_fake.add_customer()["id"]
    owner.__class__.objects.filter(pk=owner.pk).update(stripe_customer_id=customer)
    stripe_fake.add_subscription(customer, "kody_pro_month")
    tasks.refresh_stripe_plan(owner.stable_user_id)
    owner.refresh_from_db()
    assert owner.stripe_plan == "pro"


def test_a_user_id_with_no_account_is_ignored_by_the_refresh_task(stripe_fake):
    from apps.entitlements import tasks

    tasks.refresh_stripe_plan("0" * 64)  # no error: the account is gone


def test_cancel_clears_the_refresh_alarm(owner):
    StripePlanRefresh.call(owner.stable_user_id, "arm")
    StripePlanRefresh.call(owner.stable_user_id, "cancel")
    assert UserSchema.objects.get(user_id=owner.stable_user_id).alarm_at is None
