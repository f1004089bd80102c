"""Operator capabilities over the system mailbox (kody@, support@, abuse@, ...): read and send
its mail, and keep its sender rules. All ``role: admin``; writes are audit-first.

System mail is operator-owned (no user's content): a message's body is returned by
``adminSystemEmailGet`` only; lists carry headers and state, never a body or raw MIME key.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from apps.accounts.services import audit
from apps.accounts.usernames import SYSTEM_EMAIL_LOCALS
from apps.mailbox.models import SYSTEM_EMAIL_OWNER, SenderRuleEffect, SenderRuleKind
from apps.mailbox.services import sender_rules
from apps.system_email import models as m
from apps.system_email.services import outbound
from kody.capabilities import Context, capability
from kody.capabilities.cursors import cursor_schema
from kody.errors import InvalidInput, NotFound

MESSAGE_ID = {"type": "string", "minLength": 1, "maxLength": 64}
LOCALS = sorted(SYSTEM_EMAIL_LOCALS)


class SystemMessageNotFound(NotFound):
    code = "system_email_not_found"
    message = "No such system message."


def _summary(msg: m.SystemEmailMessage) -> dict[str, Any]:
    return {
        "messageId": msg.id,
        "threadId": msg.thread_id,
        "direction": msg.direction,
        "from": msg.from_address,
        "to": list(msg.to_addresses_json),
        "subject": msg.subject,
        "processingStatus": msg.processing_status,
        "deliveryStatus": msg.delivery_status,
        "classification": msg.classification,
        "createdAt": msg.created_at.isoformat(),
    }


def _full(msg: m.SystemEmailMessage) -> dict[str, Any]:
    return {
        **_summary(msg),
        "cc": list(msg.cc_addresses_json),
        "messageIdHeader": msg.message_id_header,
        "inReplyTo": msg.in_reply_to_header,
        "text": msg.text_body,
        "html": msg.html_body,
        "attachments": [
            {"filename": a.filename, "contentType": a.content_type, "size": a.size}
            for a in msg.attachments.all()
        ],
        "error": msg.error,
    }


@capability(
    name="adminSystemEmailList",
    domain="admin",
    role="admin",
    title="List system mail (operator)",
    description=(
        "System-mailbox messages newest first (headers and state, no bodies), optionally one "
        "direction or classification; pass nextCursor back until it is null."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "direction": {"type": "string", "enum": ["inbound", "outbound"]},
            "classification": {"type": "string", "enum": list(m.Classification.values)},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100},
            "cursor": cursor_schema(64, nullable=True),
        },
        "additionalProperties": False,
    },
)
def admin_system_email_list(
    ctx: Context,
    direction: str | None = None,
    classification: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> dict[str, Any]:
    rows = m.SystemEmailMessage.objects.order_by("-created_at", "-id")
    if direction is not None:
        rows = rows.filter(direction=direction)
    if classification is not None:
        rows = rows.filter(classification=classification)
    if cursor:
        last = m.SystemEmailMessage.objects.filter(pk=cursor).first()
        if last is None:
            raise InvalidInput("The cursor is not one this query returned.")
        rows = rows.filter(
            Q(created_at__lt=last.created_at) | Q(created_at=last.created_at, id__lt=last.pk)
        )
    page = list(rows[: limit + 1])
    more, page = len(page) > limit, page[:limit]
    return {
        "messages": [_summary(msg) for msg in page],
        "nextCursor": page[-1].pk if more else None,
    }


@capability(
    name="adminSystemEmailGet",
    domain="admin",
    role="admin",
    title="One system message (operator)",
    description="One system-mailbox message with its body and attachment names.",
    input_schema={
        "type": "object",
        "properties": {"messageId": MESSAGE_ID},
        "required": ["messageId"],
        "additionalProperties": False,
    },
)
def admin_system_email_get(ctx: Context, messageId: str) -> dict[str, Any]:  # noqa: N803
    msg = m.SystemEmailMessage.objects.filter(pk=messageId).first()
    if msg is None:
        raise SystemMessageNotFound(details={"messageId": messageId})
    return _full(msg)


@capability(
    name="adminSystemEmailSend",
    domain="admin",
    role="admin",
    mutates=True,
    title="Send from a system address (operator)",
    description=(
        "Send plain-text mail from a reserved system local (support@, abuse@, ...), optionally "
        "as a reply to a system message (threaded with In-Reply-To/References)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "local": {"type": "string", "enum": LOCALS},
            "to": {
                "type": "array",
                "items": {"type": "string", "format": "email", "minLength": 3, "maxLength": 320},
                "minItems": 1,
                "maxItems": 50,
            },
            "subject": {"type": "string", "minLength": 1, "maxLength": 998},
            "text": {"type": "string", "minLength": 1, "maxLength": 100_000},
            "replyToMessageId": MESSAGE_ID,
        },
        "required": ["local", "to", "subject", "text"],
        "additionalProperties": False,
    },
)
def admin_system_email_send(
    ctx: Context,
    local: str,
    to: list[str],
    subject: str,
    text: str,
    replyToMessageId: str | None = None,  # noqa: N803
) -> dict[str, Any]:
    parent = None
    if replyToMessageId is not None:
        parent = m.SystemEmailMessage.objects.filter(pk=replyToMessageId).first()
        if parent is None:
            raise SystemMessageNotFound(details={"messageId": replyToMessageId})
    audit.record_intent(ctx, "adminSystemEmailSend", f"local={local} recipients={len(to)}")
    msg = outbound.send(local, to, subject, text, reply_to=parent)
    return _summary(msg)


RULE_ID = {"type": "string", "minLength": 1, "maxLength": 64}


@capability(
    name="adminSystemEmailSenderRuleList",
    domain="admin",
    role="admin",
    title="System mailbox sender rules (operator)",
    description="The allow/block/quarantine rules applied to mail for the system addresses.",
)
def admin_system_email_sender_rule_list(ctx: Context) -> dict[str, Any]:
    return {"rules": sender_rules.list_rules(SYSTEM_EMAIL_OWNER)}


@capability(
    name="adminSystemEmailSenderRuleSet",
    domain="admin",
    role="admin",
    mutates=True,
    title="Set a system mailbox sender rule (operator)",
    description=(
        "Create or replace the rule for one sender address or domain: block refuses its mail "
        "to the system addresses, quarantine stores it marked, allow overrides a domain rule."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "kind": {"type": "string", "enum": list(SenderRuleKind.values)},
            "value": {"type": "string", "minLength": 1, "maxLength": 320},
            "effect": {"type": "string", "enum": list(SenderRuleEffect.values)},
            "note": {"type": "string", "maxLength": 500},
        },
        "required": ["kind", "value", "effect"],
        "additionalProperties": False,
        # As the rule check says: an address rule names a full address; a domain rule a
        # dotted name without "@".
        "anyOf": [
            {"properties": {"kind": {"const": "address"}, "value": {"pattern": "@"}}},
            {"properties": {"kind": {"const": "domain"}, "value": {"pattern": "^[^@]*[.][^@]*$"}}},
        ],
    },
)
def admin_system_email_sender_rule_set(
    ctx: Context, kind: str, value: str, effect: str, note: str = ""
) -> dict[str, Any]:
    audit.record_intent(ctx, "adminSystemEmailSenderRuleSet", f"kind={kind} effect={effect}")
    return sender_rules.set_rule(SYSTEM_EMAIL_OWNER, kind, value, effect, note)


@capability(
    name="adminSystemEmailSenderRuleDelete",
    domain="admin",
    role="admin",
    mutates=True,
    title="Delete a system mailbox sender rule (operator)",
    description="Remove one system-mailbox sender rule by id.",
    input_schema={
        "type": "object",
        "properties": {"ruleId": RULE_ID},
        "required": ["ruleId"],
        "additionalProperties": False,
    },
)
def admin_system_email_sender_rule_delete(ctx: Context, ruleId: str) -> dict[str, Any]:  # noqa: N803
    audit.record_intent(ctx, "adminSystemEmailSenderRuleDelete")
    sender_rules.delete_rule(SYSTEM_EMAIL_OWNER, ruleId)
    return {"deleted": True, "ruleId": ruleId}
