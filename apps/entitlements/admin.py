"""Usage and billing ledgers are written by lanes and webhooks: the admin only reads them."""

from __future__ import annotations

from django.contrib import admin

from apps.accounts.admin import ReadOnlyModelAdmin
from apps.entitlements import models as m


@admin.register(m.UsageRollup)
class UsageRollupAdmin(ReadOnlyModelAdmin):
    list_display = ("user_id", "metric", "month", "event_count", "error_count", "total_bytes")
    list_filter = ("metric",)
    search_fields = ("user_id",)


@admin.register(m.UsageEvent)
class UsageEventAdmin(ReadOnlyModelAdmin):
    list_display = ("occurred_at", "user_id", "metric", "duration_ms", "bytes", "error")
    list_filter = ("metric", "error")
    search_fields = ("user_id",)
    date_hierarchy = "occurred_at"


@admin.register(m.StripeWebhookEvent)
class StripeWebhookEventAdmin(ReadOnlyModelAdmin):
    list_display = ("event_id", "event_type", "processed_at")
    list_filter = ("event_type",)
    search_fields = ("event_id",)


@admin.register(m.ComputeOverageInvoice)
class ComputeOverageInvoiceAdmin(ReadOnlyModelAdmin):
    list_display = ("user_id", "month", "disposition", "status", "total_cents", "stripe_invoice_id")
    list_filter = ("status", "disposition")
    search_fields = ("user_id", "stripe_invoice_id")


@admin.register(m.D1StorageReconcileCursor)
class D1StorageReconcileCursorAdmin(ReadOnlyModelAdmin):
    list_display = ("singleton", "position", "updated_at")
