"""The Mailbox's inbound delivery ledger: claim, store, commit the graph, finalize or reject."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import connections
from django.utils import timezone

from apps.entitlements.services import metering
from apps.mailbox import errors
from apps.mailbox.actor import models as m
from apps.mailbox.actor.common import (
    _FINALIZED,
    DUE_OWNERS,
    INBOUND_PROVIDER,
    STALE_DELIVERY,
    _new_id,
    normalize_subject,
    owned,
    owned_ledger,
)
from apps.mailbox.actor.weight import message_weight

# The refusal of a delivery whose message would pass the owner's storage_bytes.
STORAGE_FULL = "storage_limit_reached"


class InboundLedger:
    """Mailbox methods that take one inbound delivery through its ledger states."""

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
        storage: dict[str, int] | None = None,
    ) -> dict[str, Any]:
        """Compare-and-set dedupe, then (with ``charge``) the charge and a storing lease.

        With ``storage`` (``{"bytes", "limit"}``: what the message will weigh, the plan's
        ``storage_bytes``) the bytes are reserved in the meter before the charge, in this
        same transaction, and the ledger row records them (``reservedBytes``) until the graph
        commits; over the limit the delivery is refused for good (``storage_limit_reached``),
        uncharged, before any blob is written.

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
            # The first claim: the bytes held, then charged (same transaction), so the ledger
            # row is written once, already in its charged state — storing under a fresh lease.
            held = self._hold_delivery_bytes(storage)
            if held is None:
                self._record_rejection(delivery_id, inbox_id, STORAGE_FULL, now, raw_size)
                return {"outcome": "rejected", "reason": STORAGE_FULL}
            if charge is not None and not self._charge(delivery_id, charge):
                self._release_storage(held)
                self._record_rejection(delivery_id, inbox_id, "daily_limit_reached", now, raw_size)
                return {"outcome": "rejected", "reason": "daily_limit_reached"}
            detail: dict[str, Any] = {"messageId": _new_id(), "rawSize": raw_size}
            if storage is not None:
                detail["reservedBytes"] = held
            ev = m.EmailDeliveryEvent(
                id=_new_id(),
                inbox_id=inbox_id,
                event_type="receive_started",
                provider=INBOUND_PROVIDER,
                provider_event_id=delivery_id,
                detail_json=detail,
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
        held_now = 0
        if storage is not None and not ev.detail_json.get("reservedBytes"):
            # Nothing held for it (cleaned as an orphan, which gave its bytes back): held again.
            held = self._hold_delivery_bytes(storage)
            if held is None:
                self.reject_delivery(delivery_id, STORAGE_FULL)
                return {"outcome": "rejected", "reason": STORAGE_FULL}
            held_now = held
            ev.detail_json = {**ev.detail_json, "reservedBytes": held}
        if ev.usage_started_at is None and not self._charge(delivery_id, charge):
            self._release_storage(held_now)  # the ledger row read again below never held it
            self.reject_delivery(delivery_id, "daily_limit_reached")
            return {"outcome": "rejected", "reason": "daily_limit_reached"}
        self._mark_due(now + STALE_DELIVERY)
        return {"outcome": "storing", **self._begin_storing(ev)}

    def _hold_delivery_bytes(self, storage: dict[str, int] | None) -> int | None:
        """Hold what the delivered message will weigh; the bytes held (0 without ``storage``),
        or None when that would pass the plan's ``storage_bytes``."""
        if storage is None:
            return 0
        amount = int(storage["bytes"])
        return amount if self._hold_storage(amount, int(storage["limit"])) else None

    def _give_back_held(self, ev: m.EmailDeliveryEvent) -> None:
        """A delivery that will not be stored (refused, or cleaned as an orphan) gives back
        the bytes its claim held; the caller saves the ledger row."""
        held = int(ev.detail_json.get("reservedBytes") or 0)
        if held:
            self._release_storage(held)
            ev.detail_json = {**ev.detail_json, "reservedBytes": 0}

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
        # The claim held what the message weighs; a retry reduced under another cap may weigh
        # otherwise, and the meter follows what is stored (no extra statement when equal).
        held = int(ev.detail_json.get("reservedBytes") or 0)
        self._force_storage(message_weight(row, attachments) - held)
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
            self._give_back_held(ev)
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
