"""Usage and billing ledgers are written by lanes and webhooks: the admin only reads them."""

from __future__ import annotations

from datetime import datetime

from django.contrib import admin
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import URLPattern, path

from apps.entitlements import models as m
from apps.entitlements.services import insights
from kody.adminkit import ReadOnlyModelAdmin
from kody.charts import Chart
from kody.insights import register_panel


@admin.register(m.UsageRollup)
class UsageRollupAdmin(ReadOnlyModelAdmin):
    list_display = ("user_id", "metric", "month", "event_count", "error_count", "total_bytes")
    list_filter = ("metric",)
    search_fields = ("user_id",)
    change_list_template = "admin/entitlements/usagerollup/change_list.html"

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view(self.user_usage_view)
        return [path("user/", view, name="entitlements_user_usage"), *super().get_urls()]

    def user_usage_view(self, request: HttpRequest) -> HttpResponse:
        """One user's plan, limits, today's meter counts and monthly rollups (audited)."""
        from apps.accounts.models import User
        from apps.accounts.services import audit
        from apps.entitlements.services import summary, usage

        if not request.user.is_staff:
            return HttpResponse(status=403)
        query = request.GET.get("q", "").strip()
        target = None
        if query:
            target = User.objects.filter(
                Q(stable_user_id=query) | Q(username=query) | Q(email=query.lower())
            ).first()
            audit.record(
                category="admin",
                action="admin_user_usage",
                result="success" if target else "failure",
                email=getattr(request.user, "email", None),
                ip=request.META.get("REMOTE_ADDR"),
                path=request.path,
                reason=None if target else "not_found",
            )
        context = {
            **self.admin_site.each_context(request),
            "title": "Usage for a user",
            "query": query,
            "target": target,
            "usage": summary.usage_summary(target) if target else None,
            "monthly": usage.monthly_usage(target.stable_user_id) if target else [],
            "opts": self.model._meta,
        }
        return render(request, "admin/entitlements/user_usage.html", context)


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


def _usage_trend(now: datetime) -> Chart:
    return insights.monthly_trend(now)


register_panel("usage_trend", "Usage, last 12 months", _usage_trend, order=40)
