"""The Mailbox actor: one user's email graph, inbound delivery ledger and retention.

Design note. Every method runs in the kernel's per-user transaction with the owner row locked,
so the ledger's compare-and-set steps are plain reads and writes: nothing else can touch this
mailbox meanwhile. Every public method first checks ``mailbox_owner_identity`` against the
calling user, and every blob key the graph stores is rebuilt from that owner and the row ids
(``kody.blobs.keys``) and compared, so a crafted key can never point into another user's
prefix. Blobs are deleted *before* their rows (a crash leaves a row without a blob, never a
blob without a row); a failed delete in retention writes an hourly retry for that message and
moves on. ``purge`` clears rows only: account deletion deletes blobs from ``blob_references``
first.
"""

from __future__ import annotations

import base64
import functools
import json
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.db import connection, connections
from django.db.models import Count, Min, Q
from django.utils import timezone

from apps.entitlements.services import metering
from apps.mailbox import errors
from apps.mailbox.actor import models as m
from apps.mailbox.models import (
    EmailInboundDueOwner,
    EmailOutboundProviderIndex,
    EmailOutboundProviderIndexRepairOwner,
)
from apps.mailbox.services import blobstore
from kody import outbox
from kody.actors import Actor, OwnerMismatch, deletion_safe, reads
from kody.blobs.keys import email_attachment_key, email_raw_key

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
    def wrapper(self: Mailbox, *args: Any, **kwargs: Any) -> Any:
        self._check_owner()
        return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def owned_ledger(method: F) -> F:
    """``owned`` for a method whose first argument is an inbound delivery id: one statement
    reads the owner identity and that delivery's ledger row (the method's first read)."""

    @functools.wraps(method)
    def wrapper(self: Mailbox, delivery_id: str, *args: Any, **kwargs: Any) -> Any:
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


class Mailbox(Actor):
    name = "mailbox.Mailbox"
    tables = (
        m.MailboxMeta,
        m.MailboxOwnerIdentity,
        m.EmailThread,
        m.EmailMessage,
        m.EmailAttachment,
        m.EmailDeliveryEvent,
        m.EmailOutboundProviderIndexRepair,
        m.EmailMessageRetentionRetry,
        m.EmailMessageDeletionTombstone,
    )

    # --- owner identity --------------------------------------------------------------------

    def _check_owner(self, found: str | None = None) -> None:
        """``found``: the owner id already read with another statement (None: read it here)."""
        if getattr(self, "_owner_checked", False):  # a method calling another, same call
            return
        if found is None:
            owner = m.MailboxOwnerIdentity.objects.filter(id=1).values_list("owner_id", flat=True)
            found = owner.first()
        if found is None and not self.context.read_only:
            # A read (``@reads``) of a mailbox nothing was written to records nothing: its
            # first write does.
            m.MailboxOwnerIdentity.objects.create(id=1, owner_id=self.user_id)
            m.MailboxMeta.objects.update_or_create(
                key="schema_version", defaults={"value": str(m.MAILBOX_VERSION)}
            )
        elif found is not None and found != self.user_id:
            raise OwnerMismatch("this mailbox belongs to another owner")
        self._owner_checked = True

    def _read_owner_and_ledger(self, delivery_id: str, stored_limit: int | None) -> None:
        """The owner check, the delivery's ledger row and (with ``stored_limit``) whether the
        mailbox already holds that many messages, in one statement. The row is kept for the
        method's first ``_ledger`` read; the owner is checked before the method runs."""
        probe = "NULL::boolean"
        params: list[Any] = []
        if stored_limit is not None:
            if int(stored_limit) <= 0:
                probe = "TRUE"
            else:  # reads at most ``stored_limit`` ids, never a COUNT of the whole mailbox
                probe = "EXISTS (SELECT 1 FROM email_messages OFFSET %s LIMIT 1)"
                params.append(int(stored_limit) - 1)
        sql = (
            f"SELECT {_LEDGER_COLUMNS}, o.owner_id AS mailbox_owner, {probe} AS mailbox_full"
            " FROM (SELECT 1) AS one"
            " LEFT JOIN mailbox_owner_identity o ON o.id = 1"
            " LEFT JOIN email_delivery_events e"
            " ON e.provider = %s AND e.provider_event_id = %s"
        )
        row = next(iter(m.EmailDeliveryEvent.objects.raw(sql, [*params, INBOUND_PROVIDER,
                                                                   str(delivery_id)])))  # fmt: skip
        self._check_owner(row.mailbox_owner)
        self._preread = (str(delivery_id), row if row.pk is not None else None)
        self._mailbox_full = row.mailbox_full

    def _raw_key(self, message_id: str) -> str:
        return email_raw_key(self.user_id, message_id)

    def _check_raw_key(self, key: str | None, message_id: str) -> None:
        if key is not None and key != self._raw_key(message_id):
            raise errors.InvalidBlobKey(details={"key": "raw_mime_key"})

    def _check_attachment_key(self, att: dict[str, Any], message_id: str) -> None:
        if att.get("storage_kind") == "external":
            expected = email_attachment_key(self.user_id, message_id, att["id"])
            if att.get("storage_key") != expected:
                raise errors.InvalidBlobKey(details={"key": "storage_key"})
        elif att.get("storage_key"):
            raise errors.InvalidBlobKey(details={"key": "storage_key"})

    def _message(self, message_id: str) -> m.EmailMessage:
        found = m.EmailMessage.objects.filter(id=str(message_id)).first()
        if found is None:
            raise errors.MessageNotFound(details={"messageId": message_id})
        return found

    # --- inbound delivery ledger -----------------------------------------------------------

    def _ledger(self, delivery_id: str) -> m.EmailDeliveryEvent | None:
        preread = getattr(self, "_preread", None)
        if preread is not None and preread[0] == str(delivery_id):
            self._preread = None  # once: a later read in the same call sees its own writes
            return preread[1]
        return m.EmailDeliveryEvent.objects.filter(
            provider=INBOUND_PROVIDER, provider_event_id=delivery_id
        ).first()

    @owned_ledger
    def claim_delivery(
        self,
        delivery_id: str,
        inbox_id: str,
        fingerprint: str,
        raw_size: int,
        stored_limit: int | None = None,
        charge: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Compare-and-set dedupe, then (with ``charge``) the charge and a storing lease.

        The first claim of a delivery id wins and fixes its message id; a replay answers
        ``duplicate`` (already received) or ``rejected`` (already refused). With ``charge``
        (``{"resource", "day", "limit"}``) the winner is charged through the UserMeter in this
        same transaction — idempotent per delivery id, so a retry never pays twice — the
        pending snapshot records it, and a fresh storing lease is handed out: ``storing``.
        Without ``charge`` the answer is ``claimed`` or ``retry`` and ``begin_storing`` follows.
        """
        now = timezone.now()
        ev = self._ledger(delivery_id)
        if ev is not None and ev.state == "received":
            return {"outcome": "duplicate", "messageId": ev.message_id}
        if ev is not None and ev.state == "rejected":
            return {"outcome": "rejected", "reason": ev.detail_json.get("reason")}
        if ev is None:
            if stored_limit is not None and self._full(stored_limit):
                self._record_rejection(delivery_id, inbox_id, "mailbox_full", now, raw_size)
                return {"outcome": "rejected", "reason": "mailbox_full"}
            # The first claim: charged first (same transaction), so the ledger row is written
            # once, already in its charged state — storing under a fresh lease.
            if charge is not None and not self._charge(delivery_id, charge):
                self._record_rejection(delivery_id, inbox_id, "daily_limit_reached", now, raw_size)
                return {"outcome": "rejected", "reason": "daily_limit_reached"}
            ev = m.EmailDeliveryEvent(
                id=_new_id(),
                inbox_id=inbox_id,
                event_type="receive_started",
                provider=INBOUND_PROVIDER,
                provider_event_id=delivery_id,
                detail_json={"messageId": _new_id(), "rawSize": raw_size},
                state="pending",
                fingerprint=fingerprint,
                reconcile_after=now + STALE_DELIVERY,
                dedupe_expires_at=now + timedelta(hours=48),
                created_at=now,
                updated_at=now,
            )
            due = self._due_statement(now + STALE_DELIVERY)
            if charge is None:
                self._execute([due, self._insert(m.EmailDeliveryEvent, [ev])])
                message_id = ev.detail_json["messageId"]
                return {"outcome": "claimed", "messageId": message_id, "charged": False}
            # The due-owner hint and the ledger row: one round trip.
            return {"outcome": "storing", **self._begin_storing(ev, with_insert=[due])}
        if ev.state == "orphan-cleaned":
            ev.state = "pending"
        elif self._graph_committed(ev):
            return {"outcome": "duplicate", "messageId": ev.message_id}
        message_id = ev.detail_json["messageId"]
        if charge is None:
            if ev.state != "storing":
                ev.save(update_fields=["state"])
            charged = ev.usage_started_at is not None
            return {"outcome": "retry", "messageId": message_id, "charged": charged}
        if ev.usage_started_at is None and not self._charge(delivery_id, charge):
            self.reject_delivery(delivery_id, "daily_limit_reached")
            return {"outcome": "rejected", "reason": "daily_limit_reached"}
        self._mark_due(now + STALE_DELIVERY)
        return {"outcome": "storing", **self._begin_storing(ev)}

    def _full(self, stored_limit: int) -> bool:
        """The probe read with the ledger row (``_read_owner_and_ledger``), else its own."""
        full = getattr(self, "_mailbox_full", None)
        self._mailbox_full = None
        return bool(full) if full is not None else self._holds_at_least(stored_limit)

    @staticmethod
    def _holds_at_least(count: int) -> bool:
        """Whether the mailbox holds ``count`` messages, reading at most that many ids
        (not a COUNT over the whole mailbox on every delivery)."""
        if count <= 0:
            return True
        return m.EmailMessage.objects.order_by().values("id")[count - 1 : count].exists()

    def _charge(self, delivery_id: str, charge: dict[str, Any]) -> bool:
        """The same user's meter, in this transaction (the kernel holds this user's lock);
        idempotent per delivery id."""
        reading = metering.consume_inbound_delivery_in_call(
            self.context,
            delivery_id=delivery_id,
            resource=charge["resource"],
            day=charge["day"],
            limit=int(charge["limit"]),
        )
        return bool(reading.get("allowed"))

    def _graph_committed(self, ev: m.EmailDeliveryEvent) -> bool:
        """A delivery still storing whose graph exists (committed before commit and finalize
        were one transaction, its finalize lost): finalize it now."""
        message_id = ev.detail_json["messageId"]
        if not m.EmailMessage.objects.filter(id=message_id).exists():
            return False
        self._finalize(ev, message_id, ev.storage_lease, timezone.now())
        return True

    def _mark_due(self, at: datetime) -> None:
        self._execute([self._due_statement(at)])

    def _due_statement(self, at: datetime) -> tuple[str, list[Any]]:
        """The public due-owner hint the ``reconcile_inbound_deliveries`` lane pages by: one
        statement, and no write when an earlier due time is already there."""
        now = timezone.now()
        return (
            f"INSERT INTO {DUE_OWNERS} AS d (user_id, due_at, reason, attempt_count,"
            " created_at, updated_at) VALUES (%s, %s, 'inbound_delivery', 0, %s, %s)"
            " ON CONFLICT (user_id) DO UPDATE SET due_at = EXCLUDED.due_at,"
            " updated_at = EXCLUDED.updated_at WHERE d.due_at > EXCLUDED.due_at",
            [self.user_id, at, now, now],
        )

    @owned
    def begin_storing(self, delivery_id: str) -> dict[str, Any]:
        """Record the charge (the pending snapshot) and hand out a fresh storing lease."""
        ev = self._ledger(delivery_id)
        if ev is None or ev.state not in ("pending", "storing"):
            raise errors.DeliveryNotClaimed(details={"state": ev.state if ev else None})
        return self._begin_storing(ev)

    def _begin_storing(
        self, ev: m.EmailDeliveryEvent, *, with_insert: list[tuple[str, list[Any]]] | None = None
    ) -> dict[str, Any]:
        """``with_insert``: the row is new; insert it after these statements, in one round
        trip (otherwise it is saved)."""
        now = timezone.now()
        ev.usage_started_at = ev.usage_started_at or now
        ev.usage_effect_recorded_at = ev.usage_effect_recorded_at or now
        ev.state = "storing"
        ev.storage_lease = _new_id()
        ev.storage_lease_at = now
        ev.reconcile_after = now + STALE_DELIVERY
        ev.updated_at = now
        if with_insert is not None:
            self._execute([*with_insert, self._insert(m.EmailDeliveryEvent, [ev])])
        else:
            ev.save()
        return {"lease": ev.storage_lease, "messageId": ev.detail_json["messageId"]}

    @owned_ledger
    def commit_inbound_graph(
        self,
        delivery_id: str,
        lease: str,
        message: dict[str, Any],
        attachments: list[dict[str, Any]],
    ) -> dict[str, Any]:
        """Thread + message + attachments under a valid storing lease, and the delivery
        finalized as received, all in this one transaction: a delivery is never received
        without its graph, and a storing one never has a graph."""
        ev = self._ledger(delivery_id)
        if ev is not None and ev.state == "received" and ev.finalization_token == lease:
            return {"messageId": ev.message_id, "created": False}  # this commit, replayed
        if ev is None or ev.state != "storing" or ev.storage_lease != lease:
            raise errors.StorageLeaseLost()
        message_id = ev.detail_json["messageId"]
        if message.get("id") != message_id or message.get("inbox_id") != ev.inbox_id:
            raise errors.DeliveryNotClaimed(details={"reason": "identity mismatch"})
        self._check_raw_key(message.get("raw_mime_key"), message_id)
        if not message.get("raw_mime_key"):
            raise errors.InvalidBlobKey(details={"key": "raw_mime_key"})
        for att in attachments:
            self._check_attachment_key(att, message_id)
        now = timezone.now()
        thread_id, writes = self._thread_writes(message, now)
        fields = {k: v for k, v in message.items() if k not in ("id", "thread_id")}
        row = {
            **fields,
            "id": message_id,
            "direction": "inbound",
            "thread_id": thread_id,
            "processing_status": "stored",
            "received_at": now,
            "created_at": now,
            "updated_at": now,
        }
        writes.append(self._insert(m.EmailMessage, [row]))
        if attachments:
            rows = [{**att, "message_id": message_id, "created_at": now} for att in attachments]
            writes.append(self._insert(m.EmailAttachment, rows))
        writes.append(
            (
                f"UPDATE {m.EmailDeliveryEvent._meta.db_table} SET state = 'received',"
                " event_type = 'received', message_id = %s, finalization_token = %s,"
                " storage_lease = NULL, reconcile_after = NULL, updated_at = %s,"
                " expected_attachment_count = %s WHERE id = %s",
                [message_id, lease, now, len(attachments), ev.id],
            )
        )
        # Thread, message, attachments and the finalize: one round trip, one transaction.
        self._execute(writes)
        # No alarm and no due-owner change here: the claim left a due-owner hint, and its
        # reconcile pass schedules the next retention.
        return {"messageId": message_id, "created": True}

    def _finalize(
        self, ev: m.EmailDeliveryEvent, message_id: str, lease: str | None, now: datetime
    ) -> None:
        ev.state = "received"
        ev.event_type = "received"
        ev.message_id = message_id
        ev.finalization_token = lease
        ev.storage_lease = None
        ev.reconcile_after = None
        ev.updated_at = now
        ev.save(update_fields=_FINALIZED)

    def _record_rejection(
        self, delivery_id: str, inbox_id: str | None, reason: str, now: datetime, raw_size: int
    ) -> None:
        m.EmailDeliveryEvent.objects.create(
            id=_new_id(),
            inbox_id=inbox_id,
            event_type="rejected",
            provider=INBOUND_PROVIDER,
            provider_event_id=delivery_id,
            detail_json={"reason": reason, "rawSize": raw_size},
            state="rejected",
            created_at=now,
            updated_at=now,
        )

    @owned
    def reject_delivery(
        self, delivery_id: str, reason: str, inbox_id: str | None = None, raw_size: int = 0
    ) -> dict[str, Any]:
        """Terminal refusal (preclaim or after claim); a replay answers the same reason."""
        now = timezone.now()
        ev = self._ledger(delivery_id)
        if ev is None:
            self._record_rejection(delivery_id, inbox_id, reason, now, raw_size)
            return {"state": "rejected", "reason": reason}
        if ev.state == "received":
            return {"state": "received", "messageId": ev.message_id}
        if ev.state != "rejected":
            ev.state = "rejected"
            ev.event_type = "rejected"
            ev.detail_json = {**ev.detail_json, "reason": reason}
            ev.storage_lease = None
            ev.reconcile_after = None
            ev.updated_at = now
            ev.save()
        return {"state": "rejected", "reason": ev.detail_json.get("reason")}

    def _thread_for(self, message: dict[str, Any], now: datetime) -> str:
        thread_id, writes = self._thread_writes(message, now)
        self._execute(writes)
        return thread_id

    def _thread_writes(
        self, message: dict[str, Any], now: datetime
    ) -> tuple[str, list[tuple[str, list[Any]]]]:
        """The message's thread (its parent's, found by References / In-Reply-To, or a new
        one) and the statement that touches or creates it, for the caller to send."""
        refs = [*(message.get("references_json") or [])]
        if message.get("in_reply_to_header"):
            refs.append(message["in_reply_to_header"])
        if refs:
            parent = (
                m.EmailMessage.objects.filter(message_id_header__in=refs, thread_id__isnull=False)
                .order_by("-created_at")
                .values_list("thread_id", flat=True)
                .first()
            )
            if parent:
                touch = (
                    f"UPDATE {m.EmailThread._meta.db_table} SET last_message_at = %s,"
                    " updated_at = %s WHERE id = %s",
                    [now, now, parent],
                )
                return parent, [touch]
        thread = {
            "id": _new_id(),
            "inbox_id": message["inbox_id"],
            "subject_normalized": normalize_subject(message.get("subject") or ""),
            "root_message_id_header": message.get("message_id_header"),
            "last_message_at": now,
            "created_at": now,
            "updated_at": now,
        }
        return thread["id"], [self._insert(m.EmailThread, [thread])]

    def _insert(self, model: Any, rows: list[Any]) -> tuple[str, list[Any]]:
        """One multi-row INSERT of ``rows`` (instances, or dicts with model defaults filled
        in; values prepared by each field as ``save`` would), as SQL and parameters."""
        connection = connections[self.context.using]
        fields = model._meta.concrete_fields
        params: list[Any] = []
        for row in rows:
            obj = row if isinstance(row, model) else model(**row)
            params += [f.get_db_prep_save(getattr(obj, f.attname), connection) for f in fields]
        columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
        one = "(" + ", ".join(["%s"] * len(fields)) + ")"
        table = connection.ops.quote_name(model._meta.db_table)
        return f"INSERT INTO {table} ({columns}) VALUES {', '.join([one] * len(rows))}", params

    def _execute(self, writes: list[tuple[str, list[Any]]]) -> None:
        """``writes`` as one multi-statement query (client-side binding, as the kernel sends
        its call records): one round trip; a failing statement stops the ones after it and
        fails the call, which rolls the whole transaction back."""
        if not writes:
            return
        with connections[self.context.using].cursor() as cursor:
            cursor.execute(
                ";\n".join(sql for sql, _ in writes), [p for _, ps in writes for p in ps]
            )

    # --- outbound -------------------------------------------------------------------------

    @owned
    def write_outbound(
        self, message: dict[str, Any], attachments: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """The send's graph, written before submission (status ``stored``, ``send_requested``)."""
        now = timezone.now()
        message_id = str(message["id"])
        if m.EmailMessage.objects.filter(id=message_id).exists():
            return {"messageId": message_id, "created": False}
        self._check_raw_key(message.get("raw_mime_key"), message_id)
        for att in attachments or []:
            self._check_attachment_key(att, message_id)
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

    # --- deletion -------------------------------------------------------------------------

    def _message_blob_keys(self, msg: m.EmailMessage) -> list[str]:
        keys = [self._raw_key(msg.id)] if msg.raw_mime_key else []
        for att_id in m.EmailAttachment.objects.filter(
            message_id=msg.id, storage_kind="external"
        ).values_list("id", flat=True):
            keys.append(email_attachment_key(self.user_id, msg.id, att_id))
        return keys

    def _delete_rows(self, message_id: str) -> None:
        m.EmailAttachment.objects.filter(message_id=message_id).delete()
        m.EmailMessageRetentionRetry.objects.filter(message_id=message_id).delete()
        m.EmailOutboundProviderIndexRepair.objects.filter(message_id=message_id).delete()
        m.EmailDeliveryEvent.objects.filter(message_id=message_id).update(message_id=None)
        m.EmailMessage.objects.filter(id=message_id).delete()
        EmailOutboundProviderIndex.objects.filter(
            user_id=self.user_id, message_id=message_id
        ).delete()

    @owned
    def delete_message(self, message_id: str) -> dict[str, Any]:
        """Delete one message: its blobs first (a failure keeps the row), then its rows."""
        msg = self._message(message_id)
        for key in self._message_blob_keys(msg):
            blobstore.delete(key)  # raises BlobUnavailable: nothing is deleted
        self._delete_rows(msg.id)
        m.EmailMessageDeletionTombstone.objects.update_or_create(
            message_id=msg.id, defaults={"deleted_at": timezone.now()}
        )
        return {"deleted": True, "messageId": msg.id}

    @deletion_safe
    @owned
    def blob_references(self, cursor: str | None = None, limit: int = 500) -> dict[str, Any]:
        after = _decode_cursor(cursor, 1)
        size = _limit(limit, 500)
        rows = m.EmailMessage.objects.order_by("id")
        if after is not None:
            rows = rows.filter(id__gt=after[0])
        # Ids and keys only, and one attachment query for the whole page rather than one per
        # message: the page runs in the shard's batch transaction, and every call batched with
        # it waits for it to commit.
        found = list(rows.values_list("id", "raw_mime_key")[: size + 1])
        more = len(found) > size
        found = found[:size]
        external: dict[str, list[str]] = {}
        for message_id, att_id in (
            m.EmailAttachment.objects.filter(
                message_id__in=[message_id for message_id, _ in found], storage_kind="external"
            )
            .order_by("message_id", "id")
            .values_list("message_id", "id")
        ):
            external.setdefault(message_id, []).append(att_id)
        refs = []
        for message_id, raw_key in found:
            if raw_key:
                refs.append({"bucket": "email_blobs", "key": self._raw_key(message_id)})
            for att_id in external.get(message_id, ()):
                key = email_attachment_key(self.user_id, message_id, att_id)
                refs.append({"bucket": "email_blobs", "key": key})
        return {"references": refs, "next_cursor": _encode_cursor(found[-1][0]) if more else None}

    @deletion_safe
    @owned
    def export_pages(self, cursor: str | None = None, limit: int = 500) -> dict[str, Any]:
        """One keyset page of one section (threads, messages, attachments, delivery events)."""
        position = _decode_cursor(cursor, 2) or [EXPORT_SECTIONS[0], ""]
        section, after = position
        model = _section_model(section)
        size = _limit(limit, 500)
        found = list(model.objects.filter(id__gt=after).order_by("id")[: size + 1])
        rows = [_row(r) for r in found[:size]]
        for row in rows:
            for lease in ("storage_lease", "cleanup_lease", "finalization_token"):
                row.pop(lease, None)
        if len(found) > size:
            next_cursor = _encode_cursor(section, found[size - 1].id)
        else:
            index = EXPORT_SECTIONS.index(section)
            nxt = EXPORT_SECTIONS[index + 1] if index + 1 < len(EXPORT_SECTIONS) else None
            next_cursor = _encode_cursor(nxt, "") if nxt else None
        return {"section": section, "rows": rows, "next_cursor": next_cursor}

    @owned
    def import_page(self, page: dict[str, Any]) -> dict[str, Any]:
        """Restore one ``export_pages`` page (``import_account``), sections in export order so
        parents come first. Rows keep their ids (blob keys embed them); a row already here is
        left alone, so a rerun of the same page changes nothing. The stale-delivery and
        retention clocks start again from now."""
        section = page.get("section")
        model = _section_model(section)
        fields = model._meta.concrete_fields
        objects = [
            model(**{f.attname: row[f.column] for f in fields if f.column in row})
            for row in page.get("rows", [])
        ]
        for obj in objects:
            # Blob keys come from this owner and the row's ids, never from the archive: a key
            # read from it could name another account's bytes.
            if isinstance(obj, m.EmailMessage) and obj.raw_mime_key:
                obj.raw_mime_key = self._raw_key(obj.id)
            elif isinstance(obj, m.EmailAttachment):
                external = obj.storage_kind == "external"
                obj.storage_key = (
                    email_attachment_key(self.user_id, obj.message_id, obj.id) if external else None
                )
        model.objects.bulk_create(objects, ignore_conflicts=True)
        if section == "messages" and objects:
            self.set_alarm(timezone.now() + MESSAGE_RETENTION)
        return {"imported": {model._meta.db_table: len(objects)}}

    @deletion_safe
    @owned
    def purge(self) -> dict[str, Any]:
        """Clear every Mailbox row and the alarm; never blobs (deletion removed those first)."""
        deleted: dict[str, int] = {}
        for model in (
            m.EmailAttachment,
            m.EmailMessageRetentionRetry,
            m.EmailOutboundProviderIndexRepair,
            m.EmailMessageDeletionTombstone,
            m.EmailDeliveryEvent,
            m.EmailMessage,
            m.EmailThread,
            m.MailboxMeta,
        ):
            deleted[model._meta.db_table], _ = model.objects.all().delete()
        self.clear_alarm()
        return {"deleted": deleted}

    # --- retention, index repairs and stale deliveries (the alarm) --------------------------

    @owned
    def run_retention_now(self) -> dict[str, Any]:
        before = self.count()
        result = self._maintain(timezone.now())
        return {"before": before, "after": self.count(), **result}

    def alarm(self) -> None:
        self._check_owner()
        self._maintain(timezone.now())

    def _maintain(self, now: datetime) -> dict[str, Any]:
        failures, remaining = self._expire_messages(now)
        events = self._expire_events(now)
        threads = self._prune_orphan_threads()
        self._repair_index(now)
        self._reconcile_stale(now)
        more = remaining or events == BATCH or threads == BATCH
        self._schedule(now, continuation=more)
        return {"blobDeleteFailures": failures, "expiredRemaining": remaining}

    def _expire_messages(self, now: datetime) -> tuple[int, int]:
        cutoff = now - MESSAGE_RETENTION
        waiting = m.EmailMessageRetentionRetry.objects.filter(retry_at__gt=now).values("message_id")
        candidates = m.EmailMessage.objects.filter(created_at__lt=cutoff).exclude(id__in=waiting)
        failures = 0
        for msg in list(candidates.order_by("created_at", "id")[:BLOB_MESSAGES_PER_PASS]):
            try:
                for key in self._message_blob_keys(msg):
                    blobstore.delete(key)
            except errors.BlobUnavailable as exc:
                failures += 1
                retry, _ = m.EmailMessageRetentionRetry.objects.get_or_create(
                    message_id=msg.id, defaults={"retry_at": now + RETRY_DELAY}
                )
                retry.retry_at = now + RETRY_DELAY
                retry.attempt_count += 1
                retry.last_error = exc.message
                retry.save()
                continue
            self._delete_rows(msg.id)
        return failures, candidates.count()

    def _expire_events(self, now: datetime) -> int:
        cutoff = now - EVENT_RETENTION
        ids = list(
            m.EmailDeliveryEvent.objects.filter(created_at__lt=cutoff)
            .exclude(state__in=("pending", "storing", "cleaning"))
            .order_by("created_at", "id")
            .values_list("id", flat=True)[:BATCH]
        )
        m.EmailDeliveryEvent.objects.filter(id__in=ids).delete()
        m.EmailMessageDeletionTombstone.objects.filter(deleted_at__lt=cutoff).delete()
        return len(ids)

    def _prune_orphan_threads(self) -> int:
        used = m.EmailMessage.objects.filter(thread_id__isnull=False).values("thread_id")
        ids = list(
            m.EmailThread.objects.exclude(id__in=used)
            .order_by("id")
            .values_list("id", flat=True)[:BATCH]
        )
        m.EmailThread.objects.filter(id__in=ids).delete()
        return len(ids)

    def _repair_index(self, now: datetime) -> None:
        for repair in m.EmailOutboundProviderIndexRepair.objects.filter(retry_at__lte=now)[:BATCH]:
            try:
                write_provider_index(
                    self.user_id,
                    repair.provider,
                    repair.provider_message_id,
                    repair.message_id,
                    repair.inbox_id,
                )
            except Exception as exc:  # the public index is down: back off, never resend
                step = INDEX_REPAIR_BACKOFF[
                    min(repair.attempt_count, len(INDEX_REPAIR_BACKOFF) - 1)
                ]
                repair.attempt_count += 1
                repair.retry_at = now + timedelta(seconds=step)
                repair.last_error = str(exc)[:500]
                repair.save()
                continue
            m.EmailOutboundProviderIndexRepair.objects.filter(
                provider=repair.provider, provider_message_id=repair.provider_message_id
            ).delete()
        self._publish_repair_health()

    @owned
    def reconcile_inbound(self) -> dict[str, Any]:
        """The ``reconcile_inbound_deliveries`` lane's visit: settle stale deliveries, move the
        owner's due-owner hint to the next one (or drop it), and schedule the next alarm."""
        now = timezone.now()
        settled, next_due = self._reconcile_stale(now)
        self._schedule(now, continuation=False)
        return {"settled": settled, "nextDueAt": _iso(next_due)}

    def _reconcile_stale(self, now: datetime) -> tuple[int, datetime | None]:
        """A delivery stuck mid-way (its lease expired, charged but never committed): finalize
        it if its graph committed, else delete its blob so nothing is orphaned (a later
        redelivery starts over and is not charged again). Then the due-owner hint follows
        what is left; the number settled and the next due time are returned."""
        stale = m.EmailDeliveryEvent.objects.filter(
            provider=INBOUND_PROVIDER, state__in=("pending", "storing"), reconcile_after__lte=now
        )
        settled = 0
        for ev in stale[:BATCH]:
            settled += 1
            message_id = ev.detail_json.get("messageId")
            if message_id and m.EmailMessage.objects.filter(id=message_id).exists():
                # Committed by an older commit whose separate finalize was lost: received.
                self._finalize(ev, message_id, ev.storage_lease, now)
                continue
            try:
                if message_id:
                    blobstore.delete(self._raw_key(message_id))
            except errors.BlobUnavailable:
                ev.reconcile_after = now + RETRY_DELAY
                ev.save(update_fields=["reconcile_after"])
                continue
            ev.state = "orphan-cleaned"
            ev.storage_lease = None
            ev.reconcile_after = None
            ev.updated_at = now
            ev.save()
        return settled, self._sync_due(now)

    def _sync_due(self, now: datetime) -> datetime | None:
        """The due-owner hint: the earliest unsettled delivery's reconcile time, or no row."""
        next_due = m.EmailDeliveryEvent.objects.filter(
            provider=INBOUND_PROVIDER, state__in=("pending", "storing")
        ).aggregate(t=Min("reconcile_after"))["t"]
        if next_due is None:
            EmailInboundDueOwner.objects.filter(user_id=self.user_id).delete()
            return None
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {DUE_OWNERS} (user_id, due_at, reason, attempt_count, created_at,"
                " updated_at) VALUES (%s, %s, 'inbound_delivery', 0, %s, %s)"
                " ON CONFLICT (user_id) DO UPDATE SET due_at = EXCLUDED.due_at,"
                " attempt_count = 0, last_error = NULL, updated_at = EXCLUDED.updated_at",
                [self.user_id, next_due, now, now],
            )
        return next_due

    def _schedule(self, now: datetime, *, continuation: bool) -> None:
        if continuation:
            self.set_alarm(now + CONTINUATION_DELAY)
            return
        times = [
            m.EmailMessage.objects.aggregate(t=Min("created_at"))["t"],
            m.EmailDeliveryEvent.objects.exclude(state__in=("pending", "storing")).aggregate(
                t=Min("created_at")
            )["t"],
            m.EmailMessageRetentionRetry.objects.aggregate(t=Min("retry_at"))["t"],
            m.EmailOutboundProviderIndexRepair.objects.aggregate(t=Min("retry_at"))["t"],
            m.EmailDeliveryEvent.objects.filter(state__in=("pending", "storing")).aggregate(
                t=Min("reconcile_after")
            )["t"],
        ]
        due = []
        if times[0]:
            due.append(times[0] + MESSAGE_RETENTION)
        if times[1]:
            due.append(times[1] + EVENT_RETENTION)
        due.extend(t for t in times[2:] if t)
        if due:
            self.set_alarm(max(min(due), now + CONTINUATION_DELAY))


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
