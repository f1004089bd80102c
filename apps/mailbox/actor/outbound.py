"""The Mailbox's outbound mail: the written message, its submission claim and the provider's
results, and the public reverse index from provider ids to messages."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Min
from django.utils import timezone

from apps.entitlements.services.enforcement import storage_limit_reached
from apps.mailbox import errors
from apps.mailbox.actor import models as m
from apps.mailbox.actor.common import (
    INDEX_REPAIR_BACKOFF,
    MESSAGE_RETENTION,
    SUBMISSION_LEASE,
    SUBMIT_TASK,
    _new_id,
    owned,
)
from apps.mailbox.actor.weight import UNBOUNDED, message_weight
from apps.mailbox.models import (
    EmailOutboundProviderIndex,
    EmailOutboundProviderIndexRepairOwner,
)
from kody import outbox


class OutboundMail:
    """Mailbox methods that write, submit and track one outbound message."""

    # --- outbound -------------------------------------------------------------------------

    @owned
    def write_outbound(
        self,
        message: dict[str, Any],
        attachments: list[dict[str, Any]] | None = None,
        storage_limit: int | None = None,
    ) -> dict[str, Any]:
        """The send's graph, written before submission (status ``stored``, ``send_requested``).

        Its bytes are reserved first, in this transaction, against ``storage_limit`` (the
        plan's ``storage_bytes``): over it the coded limit error rolls everything back, so
        nothing is stored and no submission is queued."""
        now = timezone.now()
        message_id = str(message["id"])
        if m.EmailMessage.objects.filter(id=message_id).exists():
            return {"messageId": message_id, "created": False}
        self._check_raw_key(message.get("raw_mime_key"), message_id)
        for att in attachments or []:
            self._check_attachment_key(att, message_id)
        weight = message_weight(message, attachments or ())
        limit = UNBOUNDED if storage_limit is None else int(storage_limit)
        if not self._hold_storage(weight, limit):
            raise storage_limit_reached(self.user_id, self._storage_used)
        thread_id = self._thread_for(message, now)
        fields = {k: v for k, v in message.items() if k not in ("id", "thread_id")}
        m.EmailMessage.objects.create(
            id=message_id,
            direction="outbound",
            thread_id=thread_id,
            processing_status="stored",
            created_at=now,
            updated_at=now,
            **fields,
        )
        m.EmailAttachment.objects.bulk_create(
            [
                m.EmailAttachment(message_id=message_id, created_at=now, **att)
                for att in attachments or []
            ]
        )
        m.EmailDeliveryEvent.objects.create(
            id=_new_id(),
            message_id=message_id,
            inbox_id=message.get("inbox_id"),
            event_type="send_requested",
            created_at=now,
            updated_at=now,
        )
        # The submission commits with the graph: a crash after COMMIT cannot lose it.
        outbox.enqueue(
            SUBMIT_TASK,
            {"user_id": self.user_id, "message_id": message_id},
            key=submission_key(message_id),
        )
        self.set_alarm(now + MESSAGE_RETENTION)
        return {"messageId": message_id, "created": True, "threadId": thread_id}

    @owned
    def claim_submission(self, message_id: str, provider: str) -> dict[str, Any]:
        """Who may hand this outbound message to the provider: at most one submitter, ever.

        ``claimed`` (with the message to send) the first time; ``sent`` / ``failed`` once a
        result is recorded; ``in_progress`` while another submitter's claim is fresh. A claim
        older than ``SUBMISSION_LEASE`` without a result belonged to a submitter that died
        between claiming and recording: whether the provider accepted the mail is unknown,
        so it is failed (``submission_interrupted``) rather than submitted a second time.
        """
        msg = self._message(message_id)
        if msg.direction != "outbound":
            raise errors.DeliveryNotClaimed(details={"reason": "not an outbound message"})
        if msg.processing_status != "stored":
            return self._submission_state(msg)
        now = timezone.now()
        ev = m.EmailDeliveryEvent.objects.filter(
            message_id=msg.id, event_type="send_requested"
        ).first()
        if ev is None:
            raise errors.DeliveryNotClaimed(details={"reason": "no send request"})
        claim = ev.detail_json.get("submission")
        if claim:
            if now - datetime.fromisoformat(claim["at"]) < SUBMISSION_LEASE:
                return {"state": "in_progress", "messageId": msg.id}
            self._record_result(msg, "failed", provider, None, "submission_interrupted")
            return self._submission_state(msg)
        submission = {"token": _new_id(), "at": now.isoformat()}
        ev.detail_json = {**ev.detail_json, "submission": submission}
        ev.updated_at = now
        ev.save(update_fields=["detail_json", "updated_at"])
        return {
            "state": "claimed",
            "messageId": msg.id,
            "token": submission["token"],
            "message": {
                "inboxId": msg.inbox_id,
                "from": msg.from_address,
                "to": msg.to_addresses_json,
                "cc": msg.cc_addresses_json,
                "bcc": msg.bcc_addresses_json,
                "subject": msg.subject,
                "text": msg.text_body,
                "html": msg.html_body,
                "messageIdHeader": msg.message_id_header,
                "inReplyTo": msg.in_reply_to_header,
                "references": msg.references_json,
            },
        }

    @staticmethod
    def _submission_state(msg: m.EmailMessage) -> dict[str, Any]:
        return {
            "state": msg.processing_status,
            "messageId": msg.id,
            "providerMessageId": msg.provider_message_id,
            "error": msg.error,
        }

    @owned
    def record_outbound_result(
        self,
        message_id: str,
        status: str,
        provider: str,
        provider_message_id: str | None = None,
        error: str | None = None,
    ) -> dict[str, Any]:
        """Terminal send state and, for an accepted send, a pending provider-index repair."""
        if status not in ("sent", "failed"):
            raise ValueError("status must be sent or failed")
        msg = self._message(message_id)
        if msg.processing_status != "stored":
            return {"messageId": message_id, "status": msg.processing_status, "changed": False}
        self._record_result(msg, status, provider, provider_message_id, error)
        return {"messageId": message_id, "status": status, "changed": True}

    def _record_result(
        self,
        msg: m.EmailMessage,
        status: str,
        provider: str,
        provider_message_id: str | None,
        error: str | None,
    ) -> None:
        message_id = msg.id
        now = timezone.now()
        msg.processing_status = status
        msg.provider_message_id = provider_message_id
        msg.error = error
        msg.sent_at = now if status == "sent" else None
        msg.updated_at = now
        msg.save()
        m.EmailDeliveryEvent.objects.create(
            id=_new_id(),
            message_id=message_id,
            inbox_id=msg.inbox_id,
            event_type=status,
            provider=provider,
            provider_message_id=provider_message_id,
            detail_json={"error": error} if error else {},
            created_at=now,
            updated_at=now,
        )
        if status == "sent" and provider_message_id:
            m.EmailOutboundProviderIndexRepair.objects.update_or_create(
                provider=provider,
                provider_message_id=provider_message_id,
                defaults={
                    "message_id": message_id,
                    "inbox_id": msg.inbox_id,
                    "retry_at": now + timedelta(seconds=INDEX_REPAIR_BACKOFF[0]),
                },
            )
            self.set_alarm(now + timedelta(seconds=INDEX_REPAIR_BACKOFF[0]))
            self._publish_repair_health()

    def _publish_repair_health(self) -> None:
        """The content-free public summary of this owner's pending provider-index repairs."""
        pending = m.EmailOutboundProviderIndexRepair.objects.aggregate(
            n=Count("provider"), oldest=Min("retry_at")
        )
        if pending["n"]:
            EmailOutboundProviderIndexRepairOwner.objects.update_or_create(
                user_id=self.user_id,
                defaults={"pending_count": pending["n"], "oldest_pending_at": pending["oldest"]},
            )
        else:
            EmailOutboundProviderIndexRepairOwner.objects.filter(user_id=self.user_id).delete()

    @owned
    def clear_index_repair(self, provider: str, provider_message_id: str) -> dict[str, Any]:
        deleted, _ = m.EmailOutboundProviderIndexRepair.objects.filter(
            provider=provider, provider_message_id=provider_message_id
        ).delete()
        self._publish_repair_health()
        return {"cleared": bool(deleted)}

    @owned
    def record_delivery_event(
        self,
        message_id: str,
        event_type: str,
        provider: str,
        provider_event_id: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A provider webhook's delivered/deferred/bounced/complained/failed for one message."""
        if event_type not in ("delivered", "deferred", "bounced", "complained", "failed"):
            raise ValueError("unknown delivery event type")
        msg = self._message(message_id)
        if (
            provider_event_id
            and m.EmailDeliveryEvent.objects.filter(
                provider=provider, provider_event_id=provider_event_id
            ).exists()
        ):
            return {"recorded": False}
        now = timezone.now()
        m.EmailDeliveryEvent.objects.create(
            id=_new_id(),
            message_id=message_id,
            inbox_id=msg.inbox_id,
            event_type=event_type,
            provider=provider,
            provider_message_id=msg.provider_message_id,
            provider_event_id=provider_event_id,
            detail_json=detail or {},
            created_at=now,
            updated_at=now,
        )
        msg.delivery_status = event_type
        msg.delivery_status_at = now
        msg.updated_at = now
        msg.save(update_fields=["delivery_status", "delivery_status_at", "updated_at"])
        return {"recorded": True}


def submission_key(message_id: str) -> str:
    """The outbox key of one message's submission (enqueueing it again adds nothing)."""
    return f"mailbox.submit:{message_id}"


def write_provider_index(
    user_id: str, provider: str, provider_message_id: str, message_id: str, inbox_id: str
) -> None:
    """The thin public reverse index; idempotent."""
    EmailOutboundProviderIndex.objects.update_or_create(
        provider=provider,
        provider_message_id=provider_message_id,
        defaults={"user_id": user_id, "message_id": message_id, "inbox_id": inbox_id},
    )
