"""Inbound mail for the reserved system locals (kody, support, abuse, postmaster, ...).

The dedicated ``system_email_*`` tables are the only authority: no Mailbox actor, no user.
Same boundary as user mail: the delivery row (compare-and-set on the delivery id) is claimed
and charged against the local's fixed daily cap in one transaction, the raw MIME is written
to ``email-raw:v1:system:email/{messageId}`` (overwrite), then one transaction writes thread,
message and attachments and marks the delivery received. A retry with the same delivery id
lands one message, one count, one blob.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps.mailbox.actor.mailbox import normalize_subject
from apps.mailbox.models import SYSTEM_EMAIL_OWNER
from apps.mailbox.services import blobstore, mime, sender_rules
from apps.mailbox.services.inbound import InboundRetry, Outcome
from apps.system_email import models as m
from kody.blobs.keys import email_raw_key

DAILY_CAP = 1000  # per reserved local and UTC day
PERSIST_CAP = 768 * 1024


def raw_key(message_id: str) -> str:
    return email_raw_key(SYSTEM_EMAIL_OWNER, message_id)


def _claim(local: str, delivery_id: str, size: int) -> tuple[str, m.SystemEmailDeliveryEvent]:
    """(outcome, ledger row) — outcome is claimed, duplicate or rejected."""
    now = timezone.now()
    with transaction.atomic():
        ev = (
            m.SystemEmailDeliveryEvent.objects.select_for_update()
            .filter(provider=m.INBOUND_PROVIDER, provider_event_id=delivery_id)
            .first()
        )
        if ev is None:
            ev = m.SystemEmailDeliveryEvent.objects.create(
                event_type=m.DeliveryEventType.RECEIVE_STARTED,
                provider=m.INBOUND_PROVIDER,
                provider_event_id=delivery_id,
                state=m.InboundState.PENDING,
                detail_json={"messageId": uuid.uuid4().hex, "local": local, "rawSize": size},
                dedupe_expires_at=now + timedelta(hours=48),
                reconcile_after=now + timedelta(hours=1),
                updated_at=now,
            )
        if ev.state == m.InboundState.RECEIVED:
            return "duplicate", ev
        if ev.state == m.InboundState.REJECTED:
            return "rejected", ev
        if size > mime.MAX_WIRE_BYTES:
            return "rejected", _reject(ev, "message_too_large")
        if ev.usage_started_at is None:
            counter, _ = m.SystemEmailDailyCounter.objects.select_for_update().get_or_create(
                local_part=local, day=now.date()
            )
            if counter.count >= DAILY_CAP:
                return "rejected", _reject(ev, "daily_limit_reached")
            m.SystemEmailDailyCounter.objects.filter(pk=counter.pk).update(
                count=F("count") + 1, operation_token=delivery_id
            )
            ev.usage_started_at = now
            ev.state = m.InboundState.STORING
            ev.updated_at = now
            ev.save()
    return "claimed", ev


def _reject(ev: m.SystemEmailDeliveryEvent, reason: str) -> m.SystemEmailDeliveryEvent:
    ev.state = m.InboundState.REJECTED
    ev.event_type = m.DeliveryEventType.REJECTED
    ev.detail_json = {**ev.detail_json, "reason": reason}
    ev.updated_at = timezone.now()
    ev.save()
    return ev


def _commit(ev_id: str, message_id: str, parsed: mime.Parsed, attachments: list[dict[str, Any]],
            envelope_from: str | None) -> None:  # fmt: skip
    now = timezone.now()
    with transaction.atomic():
        ev = m.SystemEmailDeliveryEvent.objects.select_for_update().get(id=ev_id)
        if ev.state == m.InboundState.RECEIVED:
            return
        fields = dict(parsed.message)
        fields.pop("mime_defects_json")
        thread = m.SystemEmailThread.objects.create(
            subject_normalized=normalize_subject(fields["subject"]),
            root_message_id_header=fields["message_id_header"],
            last_message_at=now,
        )
        msg = m.SystemEmailMessage.objects.create(
            id=message_id,
            direction=m.Direction.INBOUND,
            thread=thread,
            envelope_from=envelope_from,
            processing_status=m.ProcessingStatus.STORED,
            raw_mime_key=raw_key(message_id),
            received_at=now,
            **{k: v for k, v in fields.items() if k not in ("envelope_from",)},
        )
        for att in attachments:
            att = {k: v for k, v in att.items() if k != "part_index"}
            m.SystemEmailAttachment.objects.create(message=msg, **att)
        ev.message = msg
        ev.state = m.InboundState.RECEIVED
        ev.event_type = m.DeliveryEventType.RECEIVED
        ev.expected_attachment_count = len(attachments)
        ev.reconcile_after = None
        ev.updated_at = now
        ev.save()


def deliver(raw: bytes, local: str, delivery_id: str, envelope_from: str | None = None) -> Outcome:
    outcome, ev = _claim(local, delivery_id, len(raw))
    if outcome == "duplicate":
        return Outcome("duplicate", ev.message_id)
    if outcome == "rejected":
        return Outcome("rejected", reason=ev.detail_json.get("reason"))
    message_id = ev.detail_json["messageId"]
    try:
        parsed = mime.parse(raw)
        # The operators' sender rules for the system mailbox (adminSystemEmailSenderRule*).
        effect = sender_rules.effect_for(SYSTEM_EMAIL_OWNER, parsed.message["from_address"])
        if effect == "block":
            _reject(ev, "sender_blocked")
            return Outcome("rejected", reason="sender_blocked")
        if effect == "quarantine":
            parsed.message.update(classification="quarantined", classification_reason="sender_rule")
        stored, attachments = raw, parsed.attachments
        if len(raw) > PERSIST_CAP or parsed.bound:
            reduced = mime.reduce_to_cap(raw, PERSIST_CAP, parsed)
            stored, attachments = reduced.raw, reduced.omitted
            parsed.message.update(text_body=reduced.text_body, html_body=reduced.html_body)
        blobstore.put(raw_key(message_id), stored)
        _commit(ev.id, message_id, parsed, attachments, envelope_from)
    except Exception as exc:
        raise InboundRetry() from exc
    return Outcome("received", message_id)
