"""Inbound mail: from raw bytes at the door to a received message in the owner's Mailbox.

Design note (the durability boundary, seed 000). The order is fixed, and each step is safe to
repeat with the same delivery id:

1. the Mailbox's compare-and-set on the delivery id picks the winner and fixes the message id
   (a replay of a finished delivery answers ``duplicate`` or its rejection);
2. the UserMeter holds what the kept message will weigh against ``storage_bytes`` (over the
   limit the delivery is refused for good, ``storage_limit_reached``, uncharged, before any
   blob is written), then charges ``email_receives_per_day`` once per delivery id;
3. the Mailbox records the charge and hands out a storing lease, and leaves the owner a
   due-owner hint for the reconcile lane
   (1–3 are one Mailbox call: the user's meter runs inline in the same transaction);
4. the raw MIME goes to ``email-raw:v1:{userId}/{messageId}`` (overwrite: one object per key);
5. one Mailbox transaction commits thread + message + attachments under that lease and
   finalizes the delivery as received (graph and "received" cannot come apart).

Before step 1 the message is parsed within the bounds of ``services/bounds.py`` (any bytes give
a storable message, reduced past a bound or the plan's cap), so nothing after the claim
depends on the message being well formed: the only failures left are outages, and those are
worth retrying.

A failure anywhere from 2 on raises ``InboundRetry``: the sender retries with the same
delivery id and the steps above make that land exactly one message, one charge, one blob. A
delivery abandoned mid-way (lease expired, charged but never committed) is reconciled by the
``reconcile_inbound_deliveries`` lane (and the Mailbox alarm), which deletes its blob and
gives back the bytes its claim held.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from apps.entitlements import services as entitlements
from apps.entitlements.plans import limit_for
from apps.entitlements.services.enforcement import utc_day
from apps.mailbox import system_mail
from apps.mailbox.actor import Mailbox
from apps.mailbox.actor.weight import message_weight
from apps.mailbox.services import blobstore, bounds, inboxes, mime, routing, sender_rules
from kody.blobs.keys import email_raw_key
from kody.errors import KodyError

log = logging.getLogger(__name__)
RECEIVES = "email_receives_per_day"


class InboundRetry(KodyError):
    code = "inbound_retry"
    status = 503
    message = "The message could not be stored now; deliver it again with the same delivery id."


@dataclass(frozen=True)
class Outcome:
    status: str  # received | rejected | duplicate
    message_id: str | None = None
    reason: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"status": self.status, "messageId": self.message_id, "reason": self.reason}


DELIVERY_ID_CHARS = 200  # the ledgers' provider_event_id holds 255


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def delivery_id_for(raw: bytes, recipient: str) -> str:
    """Without a provider delivery id, the bytes and the recipient stand in for one."""
    return "sha256:" + mime.fingerprint(_encoded(recipient.lower()) + b"\n" + raw)


def ledger_id(delivery_id: str) -> str:
    """The id the ledgers key on: the sender's own when it is short printable text, otherwise
    its digest — the same for every retry, and storable whatever the sender sent."""
    if len(delivery_id) <= DELIVERY_ID_CHARS and delivery_id.isprintable():
        return delivery_id
    return "sha256:" + mime.fingerprint(_encoded(delivery_id))


def deliver(
    raw: bytes, recipient: str, delivery_id: str | None = None, envelope_from: str | None = None
) -> Outcome:
    delivery_id = ledger_id(delivery_id) if delivery_id else delivery_id_for(raw, recipient)
    if envelope_from is not None:
        envelope_from = bounds.capped(bounds.storable(envelope_from))
    route = routing.resolve(recipient)
    if route.kind == "system":
        return system_mail.handler().deliver(raw, route.base_local, delivery_id, envelope_from)
    if route.kind != "user" or route.user is None:
        return Outcome("rejected", reason="unknown_recipient")
    return _deliver_to_user(raw, route.user, delivery_id, envelope_from)


def _mailbox(uid: str, method: str, **kwargs: Any) -> Any:
    return Mailbox.call(uid, method, **kwargs)


def _deliver_to_user(raw: bytes, user: Any, delivery_id: str, envelope_from: str | None) -> Outcome:
    uid = user.stable_user_id
    if len(raw) > mime.MAX_WIRE_BYTES:  # refused unparsed
        inbox = inboxes.writable_inbox(user)
        done = _mailbox(
            uid, "reject_delivery", delivery_id=delivery_id, reason="message_too_large",
            inbox_id=inbox.id, raw_size=len(raw),
        )  # fmt: skip
        return _terminal(done)
    parsed = mime.parse(raw)
    # The sender's rules are read with the inbox: one query, not two.
    rules = sender_rules.effect_annotations(uid, parsed.message["from_address"])
    inbox = inboxes.writable_inbox(user, **rules)
    if not inbox.enabled:
        return _terminal(
            _mailbox(uid, "reject_delivery", delivery_id=delivery_id, reason="inbox_disabled")
        )
    plan = entitlements.cached_plan(uid)
    if hasattr(inbox, "sender_address_rule"):
        effect = sender_rules.effect_of(inbox)
    else:  # the inbox was created just now, without the annotations
        effect = sender_rules.effect_for(uid, parsed.message["from_address"])
    if effect == "block":
        return _terminal(
            _mailbox(uid, "reject_delivery", delivery_id=delivery_id, reason="sender_blocked")
        )
    # What is kept is decided before the claim, so the claim can hold exactly what the
    # message will weigh against storage_bytes before any blob is written.
    kept = _kept(raw, parsed, effect, inbox.id, envelope_from, plan)
    claim = _mailbox(
        uid,
        "claim_delivery",
        delivery_id=delivery_id,
        inbox_id=inbox.id,
        fingerprint=mime.fingerprint(raw),
        raw_size=len(raw),
        stored_limit=limit_for(plan, "stored_email_messages"),
        charge={
            "resource": RECEIVES,
            "day": utc_day(),
            "limit": limit_for(plan, RECEIVES),
        },
        storage={"bytes": kept.weight, "limit": limit_for(plan, "storage_bytes")},
    )
    if claim["outcome"] == "duplicate":
        return Outcome("duplicate", claim["messageId"])
    if claim["outcome"] == "rejected":
        return Outcome("rejected", reason=claim["reason"])
    try:
        outcome = _store(kept, uid, delivery_id, claim)
    except KodyError as exc:
        if isinstance(exc, InboundRetry):
            raise
        log.warning("inbound %s for %s failed at a retryable step: %s", delivery_id, uid, exc.code)
        raise InboundRetry(details={"step": exc.code}) from exc
    except Exception as exc:
        log.exception("inbound %s for %s failed at a retryable step", delivery_id, uid)
        raise InboundRetry() from exc
    # The receive was charged with the claim; its usage event follows the stored graph. Named
    # by the delivery, so a retried delivery that stores again still counts once.
    entitlements.record_usage(uid, RECEIVES, identity=delivery_id)
    return outcome


def _terminal(done: dict[str, Any]) -> Outcome:
    if done.get("state") == "received":
        return Outcome("duplicate", done.get("messageId"))
    return Outcome("rejected", reason=done.get("reason"))


@dataclass(frozen=True)
class Kept:
    """What a delivery stores: the raw MIME (reduced past the plan's cap), the message row's
    fields and its attachment rows (ids not yet known), and what they weigh."""

    raw: bytes
    message: dict[str, Any]
    attachments: list[dict[str, Any]]

    @property
    def weight(self) -> int:
        return message_weight(self.message, self.attachments)


def _kept(
    raw: bytes,
    parsed: mime.Parsed,
    effect: str | None,
    inbox_id: str,
    envelope_from: str | None,
    plan: Any,
) -> Kept:
    cap = limit_for(plan, "email_message_bytes")
    stored, attachments = raw, parsed.attachments
    if len(raw) > cap or parsed.bound:  # past a bound: kept like mail above the cap
        reduced = mime.reduce_to_cap(raw, cap, parsed)
        stored, attachments = reduced.raw, reduced.omitted
        parsed.message.update(text_body=reduced.text_body, html_body=reduced.html_body)
    message = {
        **parsed.message,
        "inbox_id": inbox_id,
        "envelope_from": envelope_from,
        # The raw MIME kept (the reduced copy past the cap): what its blob holds and what the
        # message weighs. The wire size stays on the delivery event (``rawSize``).
        "raw_size": len(stored),
    }
    if effect == "quarantine":
        message.update(classification="quarantined", classification_reason="sender_rule")
    return Kept(stored, message, list(attachments))


def _store(kept: Kept, uid: str, delivery_id: str, claim: dict[str, Any]) -> Outcome:
    message_id, lease = claim["messageId"], claim["lease"]
    key = email_raw_key(uid, message_id)
    blobstore.put(key, kept.raw)
    message = {**kept.message, "id": message_id, "raw_mime_key": key}
    rows = [{**att, "id": f"{message_id}-{n}"} for n, att in enumerate(kept.attachments)]
    _mailbox(
        uid,
        "commit_inbound_graph",
        delivery_id=delivery_id,
        lease=lease,
        message=message,
        attachments=rows,
    )
    return Outcome("received", message_id)
