"""Content-free counts of the system mailbox, for the operator's mail status."""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from apps.system_email import models as m


def counts(system_prefix: str) -> dict[str, Any]:
    """Row counts, and the messages whose raw MIME key is outside ``system_prefix`` (the
    system owner's blob prefix): a reference that would reach someone else's blobs."""
    return {
        "threads": m.SystemEmailThread.objects.count(),
        "messages": m.SystemEmailMessage.objects.count(),
        "attachments": m.SystemEmailAttachment.objects.count(),
        "deliveryEvents": m.SystemEmailDeliveryEvent.objects.count(),
        "invalidReferences": m.SystemEmailMessage.objects.filter(raw_mime_key__isnull=False)
        .filter(~Q(raw_mime_key__startswith=system_prefix))
        .count(),
        "providerLinks": m.SystemEmailMessage.objects.filter(
            provider_message_id__isnull=False
        ).count(),
    }
