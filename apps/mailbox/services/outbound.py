"""Outbound mail: write the graph to the Mailbox, submit, then record what happened.

Design note. The Mailbox row exists (``stored``, ``send_requested``) before anything leaves,
so a send is never invisible. Submission goes through Django's email backend (console by
default, SMTP by settings; anymail backends work unchanged and their message id is used).
The terminal state is then written with bounded retry; it also leaves a pending provider-index
repair in the Mailbox, which the immediate public-index write clears. A failed index write
never resends: the Mailbox alarm retries the index alone.
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
from django.utils import timezone

from apps.accounts.models import User
from apps.entitlements import services as entitlements
from apps.mailbox.actor import Mailbox
from apps.mailbox.actor.mailbox import write_provider_index
from apps.mailbox.errors import SenderNotVerified
from apps.mailbox.models import (
    EmailDeliveryAlertEvent,
    EmailOutboundProviderIndex,
    EmailSenderIdentity,
    SenderIdentityStatus,
)
from apps.mailbox.services import inboxes
from kody.errors import InvalidInput

log = logging.getLogger(__name__)
TERMINAL_ATTEMPTS = 4
MAX_RECIPIENTS = 50


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


def _record(uid: str, message_id: str, **kwargs: Any) -> None:
    for attempt in range(TERMINAL_ATTEMPTS):
        try:
            Mailbox.call(uid, "record_outbound_result", message_id=message_id, **kwargs)
            return
        except Exception:
            if attempt == TERMINAL_ATTEMPTS - 1:
                log.exception("terminal state of outbound %s for %s not recorded", message_id, uid)
                raise
            time.sleep(0.05 * 2**attempt)


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
    to_list, cc_list, bcc_list = _addresses(to, "to"), _addresses(cc, "cc"), _addresses(bcc, "bcc")
    if not to_list or len(to_list) + len(cc_list) + len(bcc_list) > MAX_RECIPIENTS:
        raise InvalidInput("Between 1 and 50 recipients.", details={"to": len(to_list)})
    if text is None and html is None:
        raise InvalidInput("Give a text or an html body.")
    identity = sender(user, from_address)
    inbox = inboxes.ensure_inbox(user)
    entitlements.consume(user, "email_sends_per_day")
    uid = user.stable_user_id
    message_id = uuid.uuid4().hex
    header_id = make_msgid(domain=settings.KODY_MAIL_DOMAIN)
    from_header = formataddr((identity.display_name, identity.email))
    refs = list(references or [])
    Mailbox.call(
        uid,
        "write_outbound",
        message={
            "id": message_id,
            "inbox_id": inbox.id,
            "sender_identity_id": identity.id,
            "from_address": from_header,
            "to_addresses_json": to_list,
            "cc_addresses_json": cc_list,
            "bcc_addresses_json": bcc_list,
            "subject": subject,
            "message_id_header": header_id,
            "in_reply_to_header": in_reply_to,
            "references_json": refs,
            "text_body": text,
            "html_body": html,
        },
    )
    headers = {"Message-ID": header_id}
    if in_reply_to:
        headers["In-Reply-To"] = in_reply_to
    if refs:
        headers["References"] = " ".join(refs)
    email = EmailMultiAlternatives(
        subject, text or "", from_header, to_list, bcc=bcc_list, cc=cc_list, headers=headers
    )
    if html is not None:
        email.attach_alternative(html, "text/html")
    provider = settings.KODY_EMAIL_PROVIDER
    try:
        email.send()
    except Exception as exc:
        log.warning("outbound %s for %s was not accepted: %s", message_id, uid, exc)
        entitlements.refund(user, "email_sends_per_day")
        _record(uid, message_id, status="failed", provider=provider, error=str(exc)[:500])
        return {"messageId": message_id, "status": "failed", "error": str(exc)[:500]}
    anymail = getattr(email, "anymail_status", None)
    provider_id = getattr(anymail, "message_id", None) or header_id
    _record(uid, message_id, status="sent", provider=provider, provider_message_id=provider_id)
    try:
        write_provider_index(uid, provider, provider_id, message_id, inbox.id)
        Mailbox.call(uid, "clear_index_repair", provider=provider, provider_message_id=provider_id)
    except Exception:  # the Mailbox alarm retries the index; the mail is never resent
        log.exception("provider index for outbound %s deferred to repair", message_id)
    return {"messageId": message_id, "status": "sent", "providerMessageId": provider_id}


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
    return bool(result["recorded"])
