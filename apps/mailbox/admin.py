"""Operator admin for the shared email configuration and thin email indexes.

Message content never appears here: the user's email graph lives in the Mailbox actor.
Indexes derived from that actor (provider index, repair/due owners) are read-only.
"""

from __future__ import annotations

from datetime import datetime

from django.contrib import admin

from apps.entitlements.services import insights as usage_insights
from apps.mailbox import models as m
from kody.adminkit import ReadOnlyModelAdmin
from kody.charts import Chart
from kody.insights import register_panel


class InboxAddressInline(admin.TabularInline):
    model = m.EmailInboxAddress
    extra = 0
    fields = ("address", "local_part", "domain", "enabled")


@admin.register(m.EmailInbox)
class EmailInboxAdmin(admin.ModelAdmin):
    list_display = ("name", "user_id", "package_id", "enabled", "updated_at")
    list_filter = ("enabled",)
    search_fields = ("user_id", "name", "id")
    inlines = (InboxAddressInline,)


@admin.register(m.EmailInboxAddress)
class EmailInboxAddressAdmin(admin.ModelAdmin):
    list_display = ("address", "inbox_id", "user_id", "enabled")
    list_filter = ("enabled", "domain")
    search_fields = ("address", "user_id")
    raw_id_fields = ("inbox",)


@admin.register(m.EmailSenderIdentity)
class EmailSenderIdentityAdmin(admin.ModelAdmin):
    list_display = ("email", "user_id", "display_name", "status", "verified_at")
    search_fields = ("email", "user_id", "domain")


@admin.register(m.EmailSenderRule)
class EmailSenderRuleAdmin(admin.ModelAdmin):
    list_display = ("kind", "value", "effect", "user_id", "updated_at")
    list_filter = ("kind", "effect")
    search_fields = ("value", "user_id")


@admin.register(m.EmailOutboundProviderIndex)
class EmailOutboundProviderIndexAdmin(ReadOnlyModelAdmin):
    list_display = ("provider", "provider_message_id", "user_id", "message_id", "created_at")
    list_filter = ("provider",)
    search_fields = ("provider_message_id", "message_id", "user_id")


@admin.register(m.EmailOutboundProviderIndexRepairOwner)
class EmailOutboundProviderIndexRepairOwnerAdmin(ReadOnlyModelAdmin):
    list_display = ("user_id", "pending_count", "oldest_pending_at")
    search_fields = ("user_id",)


@admin.register(m.EmailInboundDueOwner)
class EmailInboundDueOwnerAdmin(ReadOnlyModelAdmin):
    list_display = ("user_id", "due_at", "reason", "attempt_count")
    search_fields = ("user_id",)


@admin.register(m.EmailDeliveryAlertEvent)
class EmailDeliveryAlertEventAdmin(ReadOnlyModelAdmin):
    list_display = ("provider_event_id", "provider", "event_type", "occurred_at")
    list_filter = ("event_type", "provider")


@admin.register(m.EmailUserGraphAuthority)
class EmailUserGraphAuthorityAdmin(ReadOnlyModelAdmin):
    list_display = ("id", "owner_count", "frozen_at", "dropped_at")


def _email_volume(now: datetime) -> Chart:
    return usage_insights.daily_chart(
        {"email_sends_per_day": "sent", "email_receives_per_day": "received"}, now
    )


register_panel("email_volume", "Email volume, last 28 days", _email_volume, order=10)
register_panel(
    "delivery_outcomes",
    "Outbound delivery outcomes, last 28 days",
    usage_insights.delivery_outcomes_chart,
    order=20,
)
