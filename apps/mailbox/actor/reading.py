"""The Mailbox's reads: pages of messages, search, one message, attachments, events, counts."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from apps.mailbox import errors
from apps.mailbox.actor import models as m
from apps.mailbox.actor.common import (
    _decode_cursor,
    _encode_cursor,
    _limit,
    attachment_json,
    event_json,
    owned,
    summary,
)
from kody.actors import reads
from kody.blobs.keys import email_attachment_key


class MailboxReads:
    """Mailbox methods that read; most run beside the writer (``@reads``)."""

    # --- reads ----------------------------------------------------------------------------

    def _page(
        self, rows: Any, cursor: str | None, limit: int
    ) -> tuple[list[m.EmailMessage], str | None]:
        position = _decode_cursor(cursor, 2)
        if position is not None:
            at = datetime.fromisoformat(position[0])
            rows = rows.filter(Q(created_at__lt=at) | Q(created_at=at, id__lt=position[1]))
        found = list(rows.order_by("-created_at", "-id")[: limit + 1])
        more = len(found) > limit
        found = found[:limit]
        next_cursor = _encode_cursor(found[-1].created_at, found[-1].id) if more else None
        return found, next_cursor

    def _summaries(self, rows: list[m.EmailMessage]) -> list[dict[str, Any]]:
        counts = dict(
            m.EmailAttachment.objects.filter(message_id__in=[r.id for r in rows])
            .values("message_id")
            .annotate(n=Count("id"))
            .values_list("message_id", "n")
        )
        return [summary(r, counts.get(r.id, 0)) for r in rows]

    @reads
    @owned
    def list_messages(
        self,
        limit: int | None = None,
        cursor: str | None = None,
        inbox_id: str | None = None,
        direction: str | None = None,
        classification: str | None = None,
        thread_id: str | None = None,
    ) -> dict[str, Any]:
        rows = m.EmailMessage.objects.all()
        if inbox_id:
            rows = rows.filter(inbox_id=inbox_id)
        if direction:
            rows = rows.filter(direction=direction)
        if classification:
            rows = rows.filter(classification=classification)
        if thread_id:
            rows = rows.filter(thread_id=thread_id)
        found, next_cursor = self._page(rows, cursor, _limit(limit))
        return {"messages": self._summaries(found), "nextCursor": next_cursor}

    @reads
    @owned
    def search_messages(
        self, query: str, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        text = (query or "").strip()
        rows = m.EmailMessage.objects.filter(
            Q(subject__icontains=text)
            | Q(from_address__icontains=text)
            | Q(text_body__icontains=text)
        )
        found, next_cursor = self._page(rows, cursor, _limit(limit))
        return {"messages": self._summaries(found), "nextCursor": next_cursor}

    @reads
    @owned
    def get_message(self, message_id: str) -> dict[str, Any]:
        msg = self._message(message_id)
        atts = list(
            m.EmailAttachment.objects.filter(message_id=msg.id).order_by("created_at", "id")
        )
        return {
            **summary(msg, len(atts)),
            "bcc": msg.bcc_addresses_json,
            "replyTo": msg.reply_to_addresses_json,
            "envelopeFrom": msg.envelope_from,
            "messageIdHeader": msg.message_id_header,
            "inReplyTo": msg.in_reply_to_header,
            "references": msg.references_json,
            "headers": msg.headers_json,
            "textBody": msg.text_body,
            "htmlBody": msg.html_body,
            "classificationReason": msg.classification_reason,
            "providerMessageId": msg.provider_message_id,
            "error": msg.error,
            "defects": msg.mime_defects_json,
            "attachments": [attachment_json(a) for a in atts],
        }

    @reads
    @owned
    def locate_attachment(self, message_id: str, attachment_id: str) -> dict[str, Any]:
        """Where an attachment's bytes are, as canonical keys rebuilt from the owner and ids."""
        msg = self._message(message_id)
        att = m.EmailAttachment.objects.filter(id=str(attachment_id), message_id=msg.id).first()
        if att is None:
            raise errors.AttachmentNotFound(details={"attachmentId": attachment_id})
        found = attachment_json(att)
        found["partIndex"] = att.part_index
        if att.storage_kind == "raw-mime" and msg.raw_mime_key:
            found["key"] = self._raw_key(msg.id)
        elif att.storage_kind == "external":
            found["key"] = email_attachment_key(self.user_id, msg.id, att.id)
        return found

    @reads
    @owned
    def list_delivery_events(
        self, message_id: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        rows = m.EmailDeliveryEvent.objects.all()
        if message_id:
            rows = rows.filter(message_id=self._message(message_id).id)
        found, next_cursor = self._page(rows, cursor, _limit(limit))
        return {"events": [event_json(e) for e in found], "nextCursor": next_cursor}

    @owned
    def classify(
        self, message_id: str, classification: str, reason: str | None = None
    ) -> dict[str, Any]:
        if classification not in m.CLASSIFICATIONS:
            raise ValueError("classification must be accepted or quarantined")
        msg = self._message(message_id)
        msg.classification = classification
        msg.classification_reason = reason
        msg.updated_at = timezone.now()
        msg.save(update_fields=["classification", "classification_reason", "updated_at"])
        return summary(msg)

    @reads
    @owned
    def count(self) -> dict[str, int]:
        """Content-free row counts (the export manifest and maintenance status)."""
        return {
            "threads": m.EmailThread.objects.count(),
            "messages": m.EmailMessage.objects.count(),
            "attachments": m.EmailAttachment.objects.count(),
            "deliveryEvents": m.EmailDeliveryEvent.objects.count(),
            "pendingIndexRepairs": m.EmailOutboundProviderIndexRepair.objects.count(),
            "retentionRetries": m.EmailMessageRetentionRetry.objects.count(),
        }
