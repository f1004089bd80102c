"""Constraints of the entitlements tables, enforced by Postgres."""

from __future__ import annotations

import pytest

from apps.entitlements import models as ent
from tests.constraints import refuses

pytestmark = pytest.mark.django_db

UID = "a" * 64


def test_one_rollup_per_user_metric_and_month():
    ent.UsageRollup.objects.create(user_id=UID, metric="execute", month="2026-11")
    ent.UsageRollup.objects.create(user_id=UID, metric="execute", month="2026-12")
    refuses(lambda: ent.UsageRollup.objects.create(user_id=UID, metric="execute", month="2026-11"))


@pytest.mark.parametrize("month", ["2026-13", "202611", "2026-1", "Nov"])
def test_rollup_month_is_a_utc_month_key(month):
    refuses(lambda: ent.UsageRollup.objects.create(user_id=UID, metric="m", month=month))


def _overage(**extra) -> ent.ComputeOverageInvoice:
    fields = dict(
        user_id=UID,
        month="2026-11",
        unique_worker_days=3,
        unique_worker_day_cents=30,
        durable_object_rows_read=10,
        durable_object_rows_read_cents=1,
        total_cents=31,
        disposition="invoice",
        status="invoice",
    )
    return ent.ComputeOverageInvoice.objects.create(**{**fields, **extra})


def test_one_overage_row_per_user_per_month():
    _overage(stripe_customer_id="cus_1", stripe_invoice_id="in_1")
    _overage(month="2026-12", disposition="dry_run", status="dry_run")
    refuses(lambda: _overage(disposition="soft_block", status="soft_block"))


def test_only_invoice_rows_carry_a_stripe_invoice_id():
    refuses(
        lambda: _overage(disposition="skip_legacy", status="skip_legacy", stripe_invoice_id="in_2")
    )
    _overage(disposition="invoice", status="failed")  # a failed invoice attempt has no id yet


def test_stripe_event_ids_are_processed_once():
    ent.StripeWebhookEvent.objects.create(event_id="evt_1", event_type="invoice.paid")
    refuses(lambda: ent.StripeWebhookEvent.objects.create(event_id="evt_1", event_type="x"))


def test_storage_reconcile_cursor_is_a_seeded_singleton():
    assert ent.D1StorageReconcileCursor.objects.get().position == ""
    refuses(lambda: ent.D1StorageReconcileCursor.objects.create(singleton=2))


def test_usage_events_append():
    ent.UsageEvent.objects.create(user_id=UID, metric="execute", duration_ms=5, error=True)
    assert ent.UsageEvent.objects.filter(user_id=UID, error=True).count() == 1
