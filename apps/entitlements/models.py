"""Shared usage and billing tables: monthly rollups, raw usage events, Stripe ledgers.

Daily entitlement counters are not here: they live in the per-user UserMeter actor.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from kody.fields import stable_user_id

# 'YYYY-MM', the UTC month key the original used for rollups and overage ledgers.
MONTH_PATTERN = r"^[0-9]{4}-(0[1-9]|1[0-2])$"


class UsageRollup(models.Model):
    """24-month per-user/metric/month read model, recomputed hourly from ``usage_events``."""

    # Surrogate id in place of PRIMARY KEY (user_id, metric, month): Django admin cannot
    # address composite keys; the unique constraint keeps the original identity.
    user_id = stable_user_id()
    metric = models.CharField(max_length=64)
    month = models.CharField(max_length=7)
    event_count = models.BigIntegerField(default=0)
    error_count = models.BigIntegerField(default=0)
    total_duration_ms = models.BigIntegerField(default=0)
    total_cpu_ms = models.BigIntegerField(default=0)
    total_bytes = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "usage_rollups"
        indexes = [
            models.Index(fields=["user_id", "month"], name="usage_rollups_user_month_ix"),
            # Retention prunes by month across all users.
            models.Index(fields=["month"], name="usage_rollups_month_ix"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["user_id", "metric", "month"], name="usage_rollups_key"
            ),
            models.CheckConstraint(
                condition=Q(month__regex=MONTH_PATTERN), name="usage_rollups_month_format"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.metric} {self.month}"


class UsageEvent(models.Model):
    """Append-only usage telemetry (the Analytics Engine stand-in); read only by reporting."""

    # The buffered event's own id: a batch inserted twice (a drainer recovering a dead one's
    # batch) adds nothing. Null only on rows written before events carried one.
    event_key = models.UUIDField(unique=True, null=True, blank=True, editable=False)
    user_id = stable_user_id()
    metric = models.CharField(max_length=64)
    occurred_at = models.DateTimeField(default=timezone.now)
    duration_ms = models.BigIntegerField(null=True, blank=True)
    cpu_ms = models.BigIntegerField(null=True, blank=True)
    bytes = models.BigIntegerField(null=True, blank=True)
    error = models.BooleanField(default=False)

    class Meta:
        db_table = "usage_events"
        indexes = [
            # The hourly rollup and the retention prune scan by time across users.
            models.Index(fields=["occurred_at"], name="usage_events_occurred_ix"),
            models.Index(fields=["user_id", "occurred_at"], name="usage_events_user_ix"),
        ]

    def __str__(self) -> str:
        return f"{self.metric} at {self.occurred_at:%Y-%m-%d %H:%M}"


class StripeWebhookEvent(models.Model):
    """Idempotency ledger for Stripe webhooks; pruned after 30 days by processed_at."""

    event_id = models.CharField(max_length=255, primary_key=True)
    event_type = models.CharField(max_length=128)
    processed_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        db_table = "stripe_webhook_events"

    def __str__(self) -> str:
        return self.event_id


class ComputeOverageInvoice(models.Model):
    """One overage ledger row per user per UTC month; status records the disposition."""

    user_id = stable_user_id()
    month = models.CharField(max_length=7)
    unique_worker_days = models.IntegerField()
    unique_worker_day_cents = models.IntegerField()
    durable_object_rows_read = models.BigIntegerField()
    durable_object_rows_read_cents = models.IntegerField()
    total_cents = models.IntegerField()
    # invoice, soft_block, dry_run, skip_legacy or another skip reason.
    disposition = models.CharField(max_length=32)
    # The disposition, or ``failed``.
    status = models.CharField(max_length=32)
    stripe_customer_id = models.CharField(max_length=255, null=True, blank=True)
    stripe_invoice_id = models.CharField(max_length=255, null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "compute_overage_invoices"
        indexes = [
            models.Index(fields=["status", "month"], name="compute_overage_status_ix"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["user_id", "month"], name="compute_overage_user_month"),
            models.CheckConstraint(
                condition=Q(month__regex=MONTH_PATTERN), name="compute_overage_month_format"
            ),
            # Only invoice rows ever point at a Stripe invoice.
            models.CheckConstraint(
                condition=Q(disposition="invoice") | Q(stripe_invoice_id__isnull=True),
                name="compute_overage_invoice_id",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.month} {self.status}"


class D1StorageReconcileCursor(models.Model):
    """Singleton keyset cursor (by stable_user_id) of the storage reconciliation lane.

    The name keeps the original table's, although the bytes it reconciles are now the user's
    public-schema rows.
    """

    singleton = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    position = models.CharField(max_length=64, blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "d1_storage_reconcile_cursor"
        constraints = [
            models.CheckConstraint(condition=Q(singleton=1), name="d1_storage_cursor_singleton"),
        ]

    def __str__(self) -> str:
        return f"cursor at {self.position or '(start)'}"
