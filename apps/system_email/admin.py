"""System mail is written by the inbound pipeline and its retention lane; operators read it
here and send from a reserved system address (the ``send/`` view, also a reply)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path

from apps.accounts.usernames import SYSTEM_EMAIL_LOCALS
from apps.system_email import models as m
from apps.system_email.services import outbound
from kody.adminkit import ReadOnlyModelAdmin
from kody.console import register_attention
from kody.errors import KodyError

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


class SendForm(forms.Form):
    local = forms.ChoiceField(
        label="From", choices=[(x, x) for x in sorted(SYSTEM_EMAIL_LOCALS)], initial="support"
    )
    to = forms.CharField(label="To (comma-separated)", max_length=2000)
    subject = forms.CharField(max_length=998)
    text = forms.CharField(label="Message", widget=forms.Textarea)


@admin.register(m.SystemEmailMessage)
class SystemEmailMessageAdmin(ReadOnlyModelAdmin):
    list_display = ("subject", "direction", "from_address", "classification", "created_at")
    list_filter = ("direction", "classification", "processing_status")
    search_fields = ("subject", "from_address", "message_id_header")
    date_hierarchy = "created_at"
    change_list_template = "admin/system_email/systememailmessage/change_list.html"

    def get_urls(self) -> list[Any]:
        send_view = self.admin_site.admin_view(self.send_view)
        return [path("send/", send_view, name="system_email_send"), *super().get_urls()]

    def send_view(self, request: HttpRequest) -> HttpResponse:
        """Send (or reply, with ``?reply_to=<message id>``) from a reserved system address."""
        if not request.user.is_superuser:
            raise PermissionDenied
        reply_to = m.SystemEmailMessage.objects.filter(id=request.GET.get("reply_to")).first()
        initial = {}
        if reply_to is not None:
            local = (reply_to.to_addresses_json or [""])[0].split("@")[0].split("+")[0].lower()
            subject = reply_to.subject or ""
            initial = {
                "local": local if local in SYSTEM_EMAIL_LOCALS else "support",
                "to": reply_to.from_address,
                "subject": subject if subject.lower().startswith("re:") else f"Re: {subject}",
            }
        form = SendForm(request.POST or None, initial=initial)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            to = [a.strip() for a in data["to"].split(",") if a.strip()]
            try:
                sent = outbound.send(data["local"], to, data["subject"], data["text"], reply_to)
            except KodyError as exc:
                form.add_error(None, exc.message)
            else:
                self.message_user(request, f"Message {sent.processing_status}.")
                return redirect("admin:system_email_systememailmessage_change", sent.id)
        context = {
            **self.admin_site.each_context(request),
            "title": "Send system mail",
            "form": form,
            "reply_to": reply_to,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/system_email/send.html", context)


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


@admin.register(m.OperatorAlert)
class OperatorAlertAdmin(ReadOnlyModelAdmin):
    list_display = ("key", "active", "burst_started_at", "notified_at", "last_count")


def _open_bursts() -> int:
    return m.OperatorAlert.objects.filter(active=True).count()


register_attention(
    "operator_alerts", "Open alert bursts", "system_email.operatoralert", _open_bursts
)
