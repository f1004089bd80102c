"""What every part of the Mailbox actor shares: limits, the owner-check decorators, cursors
and the JSON shapes of messages, attachments and delivery events."""

from __future__ import annotations

import base64
import functools
import json
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from apps.mailbox import errors
from apps.mailbox.actor import models as m
from apps.mailbox.models import (
    EmailInboundDueOwner,
)

MESSAGE_RETENTION = timedelta(days=365)
EVENT_RETENTION = timedelta(days=90)
RETRY_DELAY = timedelta(hours=1)
CONTINUATION_DELAY = timedelta(seconds=5)
STALE_DELIVERY = timedelta(hours=1)
DUE_OWNERS = EmailInboundDueOwner._meta.db_table
BATCH = 100
BLOB_MESSAGES_PER_PASS = 25
PAGE_MAX = 500
INBOUND_PROVIDER = "kody-inbound"
INDEX_REPAIR_BACKOFF = (60, 300, 900, 3600, 6 * 3600)
# The outbox task that submits an outbound message (apps/mailbox/tasks.py).
SUBMIT_TASK = "mailbox.submit_outbound"
# A submission claimed longer ago than this died mid-way: its outcome is unknown, so it is
# failed, never submitted again (a second submission could deliver the mail twice).
SUBMISSION_LEASE = timedelta(minutes=10)
EXPORT_SECTIONS = ("threads", "messages", "attachments", "delivery_events")
# What a finalize changes on the ledger row (the commit also sets the attachment count).
_FINALIZED = (
    "state",
    "event_type",
    "message_id",
    "finalization_token",
    "storage_lease",
    "reconcile_after",
    "updated_at",
    "expected_attachment_count",
)
# The ledger row's columns, for the one-statement owner and ledger read.
_LEDGER_COLUMNS = ", ".join(f'e."{f.column}"' for f in m.EmailDeliveryEvent._meta.concrete_fields)

F = TypeVar("F", bound=Callable[..., Any])


def owned(method: F) -> F:
    """Check (and on first write, record) the owner identity before the method runs. A
    ``@reads`` method goes outside it: ``@reads @owned def …``."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._check_owner()
        return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def owned_ledger(method: F) -> F:
    """``owned`` for a method whose first argument is an inbound delivery id: one statement
    reads the owner identity and that delivery's ledger row (the method's first read)."""

    @functools.wraps(method)
    def wrapper(self: Any, delivery_id: str, *args: Any, **kwargs: Any) -> Any:
        self._read_owner_and_ledger(delivery_id, kwargs.get("stored_limit"))
        return method(self, delivery_id, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _new_id() -> str:
    return uuid.uuid4().hex


def _encode_cursor(*parts: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(parts, default=str).encode()).decode()


def _decode_cursor(token: str | None, size: int) -> list[Any] | None:
    if not token:
        return None
    try:
        parts = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, TypeError) as exc:
        raise errors.InvalidCursor() from exc
    if not isinstance(parts, list) or len(parts) != size:
        raise errors.InvalidCursor()
    return parts


def _limit(limit: int | None, default: int = 50) -> int:
    return max(1, min(int(limit or default), PAGE_MAX))


def summary(msg: m.EmailMessage, attachment_count: int | None = None) -> dict[str, Any]:
    return {
        "id": msg.id,
        "direction": msg.direction,
        "inboxId": msg.inbox_id,
        "threadId": msg.thread_id,
        "subject": msg.subject,
        "from": msg.from_address,
        "to": msg.to_addresses_json,
        "cc": msg.cc_addresses_json,
        "receivedAt": _iso(msg.received_at),
        "sentAt": _iso(msg.sent_at),
        "createdAt": _iso(msg.created_at),
        "processingStatus": msg.processing_status,
        "deliveryStatus": msg.delivery_status,
        "classification": msg.classification,
        "malformed": bool(msg.mime_defects_json),
        "rawSize": msg.raw_size,
        "attachmentCount": attachment_count,
    }


def attachment_json(att: m.EmailAttachment) -> dict[str, Any]:
    return {
        "id": att.id,
        "filename": att.filename,
        "contentType": att.content_type,
        "contentId": att.content_id,
        "disposition": att.disposition,
        "size": att.size,
        "storageKind": att.storage_kind,
    }


def event_json(ev: m.EmailDeliveryEvent) -> dict[str, Any]:
    detail = {k: v for k, v in (ev.detail_json or {}).items() if k != "lease"}
    return {
        "id": ev.id,
        "messageId": ev.message_id,
        "eventType": ev.event_type,
        "provider": ev.provider,
        "providerMessageId": ev.provider_message_id,
        "state": ev.state,
        "detail": detail,
        "createdAt": _iso(ev.created_at),
    }


def _row(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in obj._meta.concrete_fields:
        value = getattr(obj, field.attname)
        out[field.column] = value.isoformat() if isinstance(value, datetime) else value
    return out


def _section_model(section: Any) -> Any:
    """The actor model behind one export section (the export cursor and import pages name it)."""
    if section not in EXPORT_SECTIONS:
        raise errors.InvalidCursor()
    return {
        "threads": m.EmailThread,
        "messages": m.EmailMessage,
        "attachments": m.EmailAttachment,
        "delivery_events": m.EmailDeliveryEvent,
    }[section]


def normalize_subject(subject: str) -> str:
    text = (subject or "").strip()
    while True:
        lowered = text.lower()
        for prefix in ("re:", "fw:", "fwd:", "aw:"):
            if lowered.startswith(prefix):
                text = text[len(prefix) :].strip()
                break
        else:
            return text.lower()[:500]
