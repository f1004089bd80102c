"""Outbound mail: write the graph to the Mailbox, submit through the outbox, record the result.

Design note (at most one submission, never a lost one). ``write_outbound`` writes the message
(``stored``, ``send_requested``) *and* its submission into the kernel's outbox in one actor
transaction, so once it commits the send cannot be lost: if nothing else submits it, the
outbox relay does (``mailbox.submit_outbound``, at least once). ``send`` then runs the same
submission at once, so a healthy send answers ``sent`` in the request. Whoever submits first
claims it in the Mailbox (``claim_submission``); every other run — the relay's kick racing the
request, a relay replaying after a crash — finds the claim and submits nothing. A submitter
that dies between the provider's acceptance and the recorded result leaves a claim without a
result: after ``SUBMISSION_LEASE`` it is failed as ``submission_interrupted``, never submitted
again (a second submission could deliver the mail twice; an unknown outcome is reported).

The terminal state (provider message id, sent/failed) is written back with bounded retry, then
through the outbox if the Mailbox stays unreachable. It also leaves a pending provider-index
repair, which the immediate public-index write clears; a failed index write never resends:
the Mailbox alarm retries the index alone.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from email.utils import formataddr, make_msgid, parseaddr
from typing import Any

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db.models import Q
from django.utils import timezone

from apps.accounts.models import User
from apps.entitlements import services as entitlements
from apps.entitlements.plans import limit_for
from apps.entitlements.services.usage import DELIVERY_METRIC_PREFIX
from apps.mailbox.actor import Mailbox
from apps.mailbox.actor.mailbox import write_provider_index
from apps.mailbox.errors import OutboundPaused, SenderNotVerified, SubmissionInProgress
from apps.mailbox.models import (
    EmailDeliveryAlertEvent,
    EmailOutboundProviderIndex,
    EmailSenderIdentity,
    SenderIdentityStatus,
)
from apps.mailbox.services import inboxes
from kody import outbox
from kody.errors import InvalidInput

log = logging.getLogger(__name__)
TERMINAL_ATTEMPTS = 4
MAX_RECIPIENTS = 50
SENDS = "email_sends_per_day"
RECORD_TASK = "mailbox.record_outbound_result"


def _addresses(values: list[str] | None, what: str) -> list[str]:
    out = []
    for value in values or []:
        name, addr = parseaddr(value)
        if "@" not in addr or any(c in addr for c in "\r\n"):
            raise InvalidInput(f"{what} has an invalid address.", details={what: value})
        out.append(formataddr((name, addr)) if name else addr)
    return out


def sender(user: User, from_address: str | None) -> EmailSenderIdentity:
    """Only verified sender identities send; the platform address is provisioned verified."""
    default = inboxes.ensure_sender_identity(user)
    if not from_address:
        return default
    wanted = parseaddr(from_address)[1].lower()
    found = EmailSenderIdentity.objects.filter(
        user_id=user.stable_user_id, email__iexact=wanted, status=SenderIdentityStatus.VERIFIED
    ).first()
    if found is None:
        raise SenderNotVerified(details={"from": from_address})
    return found


def sending_paused(uid: str) -> bool:
    """``users.email_outbound_paused_at`` (an operator's pause) or a suspended account: no
    mail of this user leaves, by any path — a send asked for now, or one stored before the
    pause and still waiting for its submission. Read fresh: the pause may be seconds old."""
    return (
        User.objects.filter(stable_user_id=uid)
        .filter(Q(email_outbound_paused_at__isnull=False) | Q(suspended_at__isnull=False))
        .exists()
    )


def _charge_key(message_id: str) -> str:
    return f"email-send:{message_id}"


def record_result(uid: str, message_id: str, result: dict[str, Any]) -> None:
    """Write a submission's result to the Mailbox with bounded retry (idempotent)."""
    for attempt in range(TERMINAL_ATTEMPTS):
        try:
            Mailbox.call(uid, "record_outbound_result", message_id=message_id, **result)
            return
        except Exception:
            if attempt == TERMINAL_ATTEMPTS - 1:
                raise
            time.sleep(0.05 * 2**attempt)


def _record(uid: str, message_id: str, result: dict[str, Any]) -> None:
    """The result must not be lost once the provider answered: if the Mailbox stays down, the
    outbox records it later. If even that fails the caller raises, the relay runs ``submit``
    again, and the claim left behind makes that report ``submission_interrupted``."""
    try:
        record_result(uid, message_id, result)
    except Exception:
        log.exception("result of outbound %s for %s goes through the outbox", message_id, uid)
        outbox.enqueue(
            RECORD_TASK,
            {"user_id": uid, "message_id": message_id, "result": result},
            key=f"mailbox.record:{message_id}",
        )


def _email(message: dict[str, Any]) -> EmailMultiAlternatives:
    headers = {"Message-ID": message["messageIdHeader"]}
    if message["inReplyTo"]:
        headers["In-Reply-To"] = message["inReplyTo"]
    if message["references"]:
        headers["References"] = " ".join(message["references"])
    email = EmailMultiAlternatives(
        message["subject"],
        message["text"] or "",
        message["from"],
        message["to"],
        bcc=message["bcc"],
        cc=message["cc"],
        headers=headers,
    )
    if message["html"] is not None:
        email.attach_alternative(message["html"], "text/html")
    return email


def _reply(state: dict[str, Any]) -> dict[str, Any]:
    out = {"messageId": state["messageId"], "status": state["state"]}
    if state.get("providerMessageId"):
        out["providerMessageId"] = state["providerMessageId"]
    if state.get("error"):
        out["error"] = state["error"]
    return out


def submit(uid: str, message_id: str) -> dict[str, Any]:
    """Hand one stored outbound message to the provider unless someone already did.

    The body of the ``mailbox.submit_outbound`` outbox task, and what ``send`` runs at once.
    Raises ``SubmissionInProgress`` while another submitter holds the claim, so the relay
    comes back later and finds the result."""
    provider = settings.KODY_EMAIL_PROVIDER
    claim = Mailbox.call(uid, "claim_submission", message_id=message_id, provider=provider)
    if claim["state"] == "in_progress":
        raise SubmissionInProgress(details={"messageId": message_id})
    if claim["state"] != "claimed":
        return _reply(claim)  # already sent or failed: nothing is submitted twice
    if sending_paused(uid):
        # Stored before the pause, submitted after it: failed, never handed to the provider.
        error = "email_outbound_paused"
        entitlements.refund(uid, SENDS, key=_charge_key(message_id))
        _record(uid, message_id, {"status": "failed", "provider": provider, "error": error})
        return {"messageId": message_id, "status": "failed", "error": error}
    email = _email(claim["message"])
    try:
        email.send()
    except Exception as exc:
        log.warning("outbound %s for %s was not accepted: %s", message_id, uid, exc)
        error = str(exc)[:500]
        entitlements.refund(uid, SENDS, key=_charge_key(message_id))
        _record(uid, message_id, {"status": "failed", "provider": provider, "error": error})
        return {"messageId": message_id, "status": "failed", "error": error}
    anymail = getattr(email, "anymail_status", None)
    provider_id = getattr(anymail, "message_id", None) or claim["message"]["messageIdHeader"]
    result = {"status": "sent", "provider": provider, "provider_message_id": provider_id}
    _record(uid, message_id, result)
    inbox_id = claim["message"]["inboxId"]
    try:
        write_provider_index(uid, provider, provider_id, message_id, inbox_id)
        Mailbox.call(uid, "clear_index_repair", provider=provider, provider_message_id=provider_id)
    except Exception:  # the Mailbox alarm retries the index; the mail is never resent
        log.exception("provider index for outbound %s deferred to repair", message_id)
    return {"messageId": message_id, "status": "sent", "providerMessageId": provider_id}


def send(
    user: User,
    *,
    to: list[str],
    subject: str,
    text: str | None = None,
    html: str | None = None,
    cc: list[str] | None = None,
    bcc: list[str] | None = None,
    from_address: str | None = None,
    in_reply_to: str | None = None,
    references: list[str] | None = None,
) -> dict[str, Any]:
    inboxes.require_graph_authority()
    if sending_paused(user.stable_user_id):
        raise OutboundPaused()
    to_list, cc_list, bcc_list = _addresses(to, "to"), _addresses(cc, "cc"), _addresses(bcc, "bcc")
    if not to_list or len(to_list) + len(cc_list) + len(bcc_list) > MAX_RECIPIENTS:
        raise InvalidInput("Between 1 and 50 recipients.", details={"to": len(to_list)})
    if text is None and html is None:
        raise InvalidInput("Give a text or an html body.")
    identity = sender(user, from_address)
    inbox = inboxes.ensure_inbox(user)
    uid = user.stable_user_id
    message_id = uuid.uuid4().hex
    entitlements.consume(user, SENDS, key=_charge_key(message_id))
    message = {
        "id": message_id,
        "inbox_id": inbox.id,
        "sender_identity_id": identity.id,
        "from_address": formataddr((identity.display_name, identity.email)),
        "to_addresses_json": to_list,
        "cc_addresses_json": cc_list,
        "bcc_addresses_json": bcc_list,
        "subject": subject,
        "message_id_header": make_msgid(domain=settings.KODY_MAIL_DOMAIN),
        "in_reply_to_header": in_reply_to,
        "references_json": list(references or []),
        "text_body": text,
        "html_body": html,
    }
    # The Mailbox reserves the message's bytes against storage_bytes in the call that writes
    # it; over the limit the coded error rolls the write and its submission back.
    storage_limit = limit_for(entitlements.cached_plan(uid), "storage_bytes")
    try:
        Mailbox.call(uid, "write_outbound", message=message, storage_limit=storage_limit)
    except entitlements.LimitReached:
        # Nothing was stored or queued, so nothing is sent: the send is given back too.
        entitlements.refund(uid, SENDS, key=_charge_key(message_id))
        raise
    # Committed with its outbox submission: from here the send cannot be lost. Submit now so
    # a healthy send answers "sent"; if this fails the relay submits it (answer "stored").
    try:
        return submit(uid, message_id)
    except SubmissionInProgress:  # the relay's kick claimed it first: it submits and records
        return {"messageId": message_id, "status": "stored"}
    except Exception:
        log.exception("outbound %s for %s left to the outbox relay", message_id, uid)
        return {"messageId": message_id, "status": "stored"}


def reply(
    user: User,
    message_id: str,
    *,
    text: str | None = None,
    html: str | None = None,
    reply_all: bool = False,
    from_address: str | None = None,
) -> dict[str, Any]:
    original = Mailbox.call(user.stable_user_id, "get_message", message_id=message_id)
    to = original["replyTo"] or [original["from"]]
    cc: list[str] = []
    if reply_all:
        own = {inboxes.address_of(user).lower()}
        cc = [a for a in original["to"] + original["cc"] if parseaddr(a)[1].lower() not in own]
    subject = original["subject"] or ""
    if not subject.lower().startswith("re:"):
        subject = f"Re: {subject}"
    parent = original["messageIdHeader"]
    refs = [*original["references"], parent] if parent else original["references"]
    return send(
        user,
        to=to,
        cc=cc,
        subject=subject,
        text=text,
        html=html,
        from_address=from_address,
        in_reply_to=parent,
        references=refs,
    )


def record_provider_event(
    provider: str,
    provider_message_id: str,
    event_type: str,
    provider_event_id: str | None = None,
    detail: dict[str, Any] | None = None,
) -> bool:
    """A provider delivery webhook: resolve the owner through the index only; unknown is a no-op."""
    row = EmailOutboundProviderIndex.objects.filter(
        provider=provider, provider_message_id=provider_message_id
    ).first()
    if row is None:
        log.info("delivery event for unknown provider message %s:%s ignored", provider,
                 provider_message_id)  # fmt: skip
        return False
    if event_type in ("bounced", "complained") and provider_event_id:
        # Short-lived, content-free signal for the operator's burst alert (no user id).
        EmailDeliveryAlertEvent.objects.get_or_create(
            provider_event_id=provider_event_id,
            defaults={
                "provider": provider,
                "event_type": event_type,
                "occurred_at": timezone.now(),
                "owner_hash": hashlib.sha256(row.user_id.encode()).hexdigest(),
            },
        )
    result = Mailbox.call(
        row.user_id,
        "record_delivery_event",
        message_id=row.message_id,
        event_type=event_type,
        provider=provider,
        provider_event_id=provider_event_id,
        detail=detail or {},
    )
    recorded = bool(result["recorded"])
    if recorded:
        # Content-free outcome telemetry: the admin insights' delivery-outcome chart.
        # Named by the provider's event, so a redelivered webhook counts once.
        entitlements.record_usage(
            row.user_id,
            f"{DELIVERY_METRIC_PREFIX}{event_type}",
            identity=f"{provider}:{provider_event_id}",
        )
    return recorded
