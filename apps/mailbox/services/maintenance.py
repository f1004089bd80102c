"""Operator maintenance: content-free counts and health, retention and one owner-scoped delete."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from apps.accounts.services.lookup import account_by_stable_id
from apps.mailbox import models as pm
from apps.mailbox import system_mail
from apps.mailbox.actor import Mailbox
from kody.blobs.keys import email_raw_prefix


def _owner(user_id: str) -> str:
    return account_by_stable_id(user_id).stable_user_id


def status(user_id: str | None = None) -> dict[str, Any]:
    marker = pm.EmailUserGraphAuthority.objects.filter(id=1).first()
    system_prefix = email_raw_prefix(pm.SYSTEM_EMAIL_OWNER)
    report: dict[str, Any] = {
        "userGraphAuthority": {
            "present": marker is not None,
            "ownerCount": marker.owner_count if marker else None,
        },
        "providerIndex": {
            "rows": pm.EmailOutboundProviderIndex.objects.count(),
            "systemRows": pm.EmailOutboundProviderIndex.objects.filter(
                user_id=pm.SYSTEM_EMAIL_OWNER
            ).count(),
            "repairOwners": pm.EmailOutboundProviderIndexRepairOwner.objects.count(),
        },
        "inboundDueOwners": pm.EmailInboundDueOwner.objects.count(),
        # Due now: the reconcile lane has not visited them yet, or backed off after a failure.
        "inboundDueOwnersDue": pm.EmailInboundDueOwner.objects.filter(
            due_at__lte=timezone.now()
        ).count(),
        "deliveryAlertEvents": pm.EmailDeliveryAlertEvent.objects.count(),
        "systemEmail": system_mail.handler().status(system_prefix),
    }
    if user_id:
        report["mailbox"] = Mailbox.call(_owner(user_id), "count")
    return report


def retention(user_id: str) -> dict[str, Any]:
    return Mailbox.call(_owner(user_id), "run_retention_now")


def delete(user_id: str, message_id: str) -> dict[str, Any]:
    return Mailbox.call(_owner(user_id), "delete_message", message_id=message_id)
