"""System mail is written by the inbound pipeline and its retention lane; the admin reads it."""

from __future__ import annotations

from django.contrib import admin

from apps.system_email import models as m
from kody.adminkit import ReadOnlyModelAdmin

# Lease and finalization tokens fence concurrent workers; showing them invites misuse.
_LEASE_TOKENS = (
    "storage_lease",
    "cleanup_lease",
    "finalization_token",
    "usage_effect_lease",
    "subscription_effect_lease",
)


@admin.register(m.SystemEmailThread)
class SystemEmailThreadAdmin(ReadOnlyModelAdmin):
    list_display = ("subject_normalized", "last_message_at")
    search_fields = ("subject_normalized",)


@admin.register(m.SystemEmailMessage)
class SystemEmailMessageAdmin(ReadOnlyModelAdmin):
    list_display = ("subject", "direction", "from_address", "classification", "created_at")
    list_filter = ("direction", "classification", "processing_status")
    search_fields = ("subject", "from_address", "message_id_header")
    date_hierarchy = "created_at"


@admin.register(m.SystemEmailAttachment)
class SystemEmailAttachmentAdmin(ReadOnlyModelAdmin):
    list_display = ("filename", "content_type", "size", "storage_kind", "created_at")
    list_filter = ("storage_kind",)


@admin.register(m.SystemEmailDeliveryEvent)
class SystemEmailDeliveryEventAdmin(ReadOnlyModelAdmin):
    exclude = _LEASE_TOKENS
    list_display = ("event_type", "provider", "state", "created_at")
    list_filter = ("event_type", "provider", "state")


@admin.register(m.SystemEmailDailyCounter)
class SystemEmailDailyCounterAdmin(ReadOnlyModelAdmin):
    list_display = ("local_part", "day", "count")
    list_filter = ("local_part",)


@admin.register(m.SystemEmailGraphAuthority)
class SystemEmailGraphAuthorityAdmin(ReadOnlyModelAdmin):
    list_display = ("authority", "cutover_at", "graph_mismatch_count", "provider_link_count")
