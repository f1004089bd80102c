"""Operators send from a reserved system local (support@, abuse@, ...) from the admin.

The message is written to the dedicated graph first (``stored``, ``send_requested``), then
submitted through Django's email backend, then marked sent or failed. System mail never gets
a provider message id: the dedicated graph has no provider links by design.
"""

from __future__ import annotations

import logging
from email.utils import make_msgid, parseaddr

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import transaction
from django.utils import timezone

from apps.accounts.usernames import SYSTEM_EMAIL_LOCALS
from apps.mailbox.actor.mailbox import normalize_subject
from apps.system_email import models as m
from kody.errors import InvalidInput

log = logging.getLogger(__name__)


def send(
    local: str, to: list[str], subject: str, text: str, reply_to: m.SystemEmailMessage | None = None
) -> m.SystemEmailMessage:
    if local not in SYSTEM_EMAIL_LOCALS:
        raise InvalidInput("Not a system address.", details={"local": local})
    recipients = [parseaddr(a)[1] for a in to]
    if not recipients or any("@" not in a for a in recipients):
        raise InvalidInput("Give at least one valid recipient address.")
    sender = f"{local}@{settings.KODY_MAIL_DOMAIN}"
    header_id = make_msgid(domain=settings.KODY_MAIL_DOMAIN)
    parent = reply_to.message_id_header if reply_to else None
    now = timezone.now()
    with transaction.atomic():
        thread = reply_to.thread if reply_to and reply_to.thread else None
        if thread is None:
            thread = m.SystemEmailThread.objects.create(
                subject_normalized=normalize_subject(subject), last_message_at=now
            )
        msg = m.SystemEmailMessage.objects.create(
            direction=m.Direction.OUTBOUND,
            thread=thread,
            from_address=sender,
            to_addresses_json=recipients,
            subject=subject,
            message_id_header=header_id,
            in_reply_to_header=parent,
            references_json=[*(reply_to.references_json if reply_to else []), parent]
            if parent
            else [],
            text_body=text,
            processing_status=m.ProcessingStatus.STORED,
        )
        m.SystemEmailDeliveryEvent.objects.create(
            message=msg, event_type=m.DeliveryEventType.SEND_REQUESTED, updated_at=now
        )
    headers = {"Message-ID": header_id}
    if parent:
        headers["In-Reply-To"] = parent
        headers["References"] = " ".join(msg.references_json)
    try:
        EmailMessage(subject, text, sender, recipients, headers=headers).send()
    except Exception as exc:
        log.warning("system mail from %s was not accepted: %s", local, exc)
        _finish(msg, m.ProcessingStatus.FAILED, str(exc)[:500])
        return msg
    _finish(msg, m.ProcessingStatus.SENT, None)
    return msg


def _finish(msg: m.SystemEmailMessage, status: str, error: str | None) -> None:
    now = timezone.now()
    with transaction.atomic():
        msg.processing_status = status
        msg.error = error
        msg.sent_at = now if status == m.ProcessingStatus.SENT else None
        msg.save(update_fields=["processing_status", "error", "sent_at", "updated_at"])
        m.SystemEmailDeliveryEvent.objects.create(
            message=msg,
            event_type=m.DeliveryEventType.SENT
            if status == m.ProcessingStatus.SENT
            else m.DeliveryEventType.FAILED,
            detail_json={"error": error} if error else {},
            updated_at=now,
        )
