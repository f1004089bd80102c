"""Constraints of the entitlements tables, enforced by Postgres."""

from __future__ import annotations

import pytest

from apps.entitlements import models as ent
from tests.constraints import refuses
from tests.entitlements.factories import (
    ComputeOverageInvoiceFactory,
    StripeWebhookEventFactory,
    UsageEventFactory,
    UsageRollupFactory,
)

pytestmark = pytest.mark.django_db

UID = "a" * 64


def test_one_rollup_per_user_metric_and_month():
    UsageRollupFactory(user_id=UID, month="2026-11")
    UsageRollupFactory(user_id=UID, month="2026-12")
    refuses(lambda: UsageRollupFactory(user_id=UID, month="2026-11"))


@pytest.mark.parametrize("month", ["2026-13", "202611", "2026-1", "Nov"])
def test_rollup_month_is_a_utc_month_key(month):
    refuses(lambda: UsageRollupFactory(user_id=UID, metric="m", month=month))


def test_one_overage_row_per_user_per_month():
    month = ComputeOverageInvoiceFactory(stripe_customer_id="cus_1", stripe_invoice_id="in_1").month
    ComputeOverageInvoiceFactory(month="1999-12", disposition="dry_run", status="dry_run")
    refuses(
        lambda: ComputeOverageInvoiceFactory(
            month=month, disposition="soft_block", status="soft_block"
        )
    )


def test_only_invoice_rows_carry_a_stripe_invoice_id():
    refuses(
        lambda: ComputeOverageInvoiceFactory(
            disposition="skip_legacy", status="skip_legacy", stripe_invoice_id="in_2"
        )
    )
    ComputeOverageInvoiceFactory(
        disposition="invoice", status="failed"
    )  # a failed invoice attempt has no id yet


def test_stripe_event_ids_are_processed_once():
    StripeWebhookEventFactory(event_id="evt_1")
    refuses(lambda: StripeWebhookEventFactory(event_id="evt_1", event_type="x"))


def test_storage_reconcile_cursor_is_a_seeded_singleton():
    assert ent.D1StorageReconcileCursor.objects.get().position == ""
    refuses(lambda: ent.D1StorageReconcileCursor.objects.create(singleton=2))


def test_usage_events_append():
    UsageEventFactory(user_id=UID, error=True)
    assert ent.UsageEvent.objects.filter(user_id=UID, error=True).count() == 1
