"""Email capabilities (SCHEMA.md §4's email group, camelCase), served on REST and MCP.

Every handler acts on the caller's own Mailbox (``ctx.user``); no input names a user, so a
message id from someone else's mailbox is simply not found.
"""

from __future__ import annotations

from typing import Any

from apps.accounts.models import User
from apps.entitlements import services as entitlements
from apps.entitlements.plans import limit_for
from apps.entitlements.services.enforcement import current_use, next_utc_midnight, utc_day
from apps.mailbox.services import inboxes, outbound, reads, sender_rules
from apps.mailbox.services import maintenance as ops
from kody.capabilities import Context, capability
from kody.capabilities.cursors import cursor_schema
from kody.errors import NotFound

ID = {"type": "string", "minLength": 1, "maxLength": 64}
LIMIT = {"type": "integer", "minimum": 1, "maximum": 500}
CURSOR = cursor_schema(2000, nullable=True)
ADDRESSES = {"type": "array", "items": {"type": "string", "maxLength": 320}, "maxItems": 50}


def _obj(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


MESSAGE_SUMMARY = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "subject": {"type": "string"},
        "from": {"type": "string"},
        "receivedAt": {"type": ["string", "null"]},
        "sentAt": {"type": ["string", "null"]},
        "direction": {"type": "string", "enum": ["inbound", "outbound"]},
        "classification": {"type": "string"},
    },
    "required": ["id", "subject", "from", "receivedAt"],
}
MESSAGE_PAGE = _obj(
    {
        "messages": {"type": "array", "items": MESSAGE_SUMMARY},
        "nextCursor": {"type": ["string", "null"]},
    },
    ("messages", "nextCursor"),
)
MESSAGE_PAGE["additionalProperties"] = True


@capability(
    name="emailInboxList",
    domain="email",
    title="List my inboxes",
    description="Your email inboxes and their addresses ({username}@ the mail domain).",
)
def email_inbox_list(ctx: Context) -> dict[str, Any]:
    return {"inboxes": inboxes.list_inboxes(ctx.user)}


@capability(
    name="emailMessageList",
    domain="email",
    title="List my messages",
    description="Your messages, newest first, one page at a time (pass nextCursor back).",
    input_schema=_obj(
        {
            "limit": LIMIT,
            "cursor": CURSOR,
            "inboxId": ID,
            "direction": {"type": "string", "enum": ["inbound", "outbound"]},
            "classification": {"type": "string", "enum": ["accepted", "quarantined"]},
            "threadId": ID,
        }
    ),
    output_schema=MESSAGE_PAGE,
)
def email_message_list(ctx: Context, **args: Any) -> dict[str, Any]:
    keys = {"inboxId": "inbox_id", "threadId": "thread_id"}
    return reads.list_messages(ctx.user, **{keys.get(k, k): v for k, v in args.items()})


@capability(
    name="emailMessageGet",
    domain="email",
    title="Read one message",
    description="One of your messages with its text and html bodies and its attachments.",
    input_schema=_obj({"messageId": ID}, ("messageId",)),
)
def email_message_get(ctx: Context, messageId: str) -> dict[str, Any]:  # noqa: N803
    return {"message": reads.get_message(ctx.user, messageId)}


@capability(
    name="emailMessageSearch",
    domain="email",
    title="Search my messages",
    description="Your messages whose subject, sender or text contains the query.",
    input_schema=_obj(
        {
            "query": {"type": "string", "minLength": 1, "maxLength": 500},
            "limit": LIMIT,
            "cursor": CURSOR,
        },
        ("query",),
    ),  # fmt: skip
    output_schema=MESSAGE_PAGE,
)
def email_message_search(
    ctx: Context, query: str, limit: int | None = None, cursor: str | None = None
) -> dict[str, Any]:
    return reads.search(ctx.user, query, limit, cursor)


@capability(
    name="emailAttachmentGet",
    domain="email",
    title="Download an attachment",
    description="One attachment of one of your messages, as base64.",
    input_schema=_obj({"messageId": ID, "attachmentId": ID}, ("messageId", "attachmentId")),
)
def email_attachment_get(ctx: Context, messageId: str, attachmentId: str) -> dict[str, Any]:  # noqa: N803
    return {"attachment": reads.attachment(ctx.user, messageId, attachmentId)}


@capability(
    name="emailDeliveryEventList",
    domain="email",
    title="Delivery history",
    description="Delivery events (received, rejected, sent, delivered, bounced, ...), newest "
    "first.",
    input_schema=_obj({"messageId": ID, "limit": LIMIT, "cursor": CURSOR}),
)
def email_delivery_event_list(ctx: Context, **args: Any) -> dict[str, Any]:
    keys = {"messageId": "message_id"}
    return reads.delivery_events(ctx.user, **{keys.get(k, k): v for k, v in args.items()})


@capability(
    name="emailMessageClassify",
    domain="email",
    title="Accept or quarantine a message",
    description="Mark one of your messages accepted or quarantined.",
    input_schema=_obj(
        {
            "messageId": ID,
            "classification": {"type": "string", "enum": ["accepted", "quarantined"]},
            "reason": {"type": "string", "maxLength": 500},
        },
        ("messageId", "classification"),
    ),
    mutates=True,
)
def email_message_classify(
    ctx: Context,
    messageId: str,  # noqa: N803
    classification: str,
    reason: str | None = None,
) -> dict[str, Any]:
    return {"message": reads.classify(ctx.user, messageId, classification, reason)}


@capability(
    name="emailMessageDelete",
    domain="email",
    title="Delete a message",
    description="Delete one of your messages and its stored MIME and attachments for good.",
    input_schema=_obj({"messageId": ID}, ("messageId",)),
    mutates=True,
)
def email_message_delete(ctx: Context, messageId: str) -> dict[str, Any]:  # noqa: N803
    return reads.delete_message(ctx.user, messageId)


@capability(
    name="emailSenderRuleList",
    domain="email",
    title="List sender rules",
    description="Your allow / block / quarantine rules for inbound senders.",
)
def email_sender_rule_list(ctx: Context) -> dict[str, Any]:
    return {"rules": sender_rules.list_rules(ctx.user_id)}


@capability(
    name="emailSenderRuleSet",
    domain="email",
    title="Set a sender rule",
    description="Allow, block or quarantine mail from an address or a whole domain.",
    input_schema={
        **_obj(
            {
                "kind": {"type": "string", "enum": ["address", "domain"]},
                "value": {"type": "string", "minLength": 3, "maxLength": 320},
                "effect": {"type": "string", "enum": ["allow", "block", "quarantine"]},
                "note": {"type": "string", "maxLength": 500},
            },
            ("kind", "value", "effect"),
        ),
        # An address rule names a full address; a domain rule a dotted name without "@".
        "anyOf": [
            {"properties": {"kind": {"const": "address"}, "value": {"pattern": "@"}}},
            {"properties": {"kind": {"const": "domain"}, "value": {"pattern": "^[^@]*[.][^@]*$"}}},
        ],
    },
    mutates=True,
)
def email_sender_rule_set(
    ctx: Context, kind: str, value: str, effect: str, note: str = ""
) -> dict[str, Any]:
    return {"rule": sender_rules.set_rule(ctx.user_id, kind, value, effect, note)}


@capability(
    name="emailSenderRuleDelete",
    domain="email",
    title="Delete a sender rule",
    description="Remove one of your sender rules.",
    input_schema=_obj({"ruleId": ID}, ("ruleId",)),
    mutates=True,
)
def email_sender_rule_delete(ctx: Context, ruleId: str) -> dict[str, Any]:  # noqa: N803
    sender_rules.delete_rule(ctx.user_id, ruleId)
    return {"deleted": True, "ruleId": ruleId}


def _usage(user: User, name: str) -> dict[str, Any]:
    plan = entitlements.cached_plan(user.stable_user_id)
    return {"used": current_use(user.stable_user_id, name), "limit": limit_for(plan, name)}


@capability(
    name="emailUsageGet",
    domain="email",
    title="My email usage",
    description="Today's sends and receives, stored messages and the largest kept message size.",
)
def email_usage_get(ctx: Context) -> dict[str, Any]:
    plan = entitlements.cached_plan(ctx.user_id)
    return {
        "plan": plan.value,
        "day": utc_day(),
        "dailyResetsAt": next_utc_midnight().isoformat(),
        "sendsPerDay": _usage(ctx.user, "email_sends_per_day"),
        "receivesPerDay": _usage(ctx.user, "email_receives_per_day"),
        "storedMessages": {
            "used": reads.count(ctx.user)["messages"],
            "limit": limit_for(plan, "stored_email_messages"),
        },
        "messageBytesLimit": limit_for(plan, "email_message_bytes"),
        "address": inboxes.address_of(ctx.user),
    }


SEND_FIELDS = {
    "text": {"type": "string", "maxLength": 262144},
    "html": {"type": "string", "maxLength": 524288},
    "from": {"type": "string", "maxLength": 320},
}


@capability(
    name="emailSend",
    domain="email",
    title="Send an email",
    description="Send mail from one of your verified sender identities (your Kody address by "
    "default). Counts against email_sends_per_day.",
    input_schema=_obj(
        {
            "to": {**ADDRESSES, "minItems": 1},
            "cc": ADDRESSES,
            "bcc": ADDRESSES,
            "subject": {"type": "string", "maxLength": 998},
            **SEND_FIELDS,
        },
        ("to", "subject"),
    ),
    mutates=True,
)
def email_send(ctx: Context, to: list[str], subject: str, **args: Any) -> dict[str, Any]:
    return outbound.send(
        ctx.user,
        to=to,
        subject=subject,
        cc=args.get("cc"),
        bcc=args.get("bcc"),
        text=args.get("text"),
        html=args.get("html"),
        from_address=args.get("from"),
    )


@capability(
    name="emailReply",
    domain="email",
    title="Reply to a message",
    description="Reply to one of your messages (threaded with In-Reply-To and References).",
    input_schema=_obj(
        {"messageId": ID, "replyAll": {"type": "boolean"}, **SEND_FIELDS}, ("messageId",)
    ),
    mutates=True,
)
def email_reply(ctx: Context, messageId: str, **args: Any) -> dict[str, Any]:  # noqa: N803
    return outbound.reply(
        ctx.user,
        messageId,
        text=args.get("text"),
        html=args.get("html"),
        reply_all=bool(args.get("replyAll")),
        from_address=args.get("from"),
    )


@capability(
    name="adminMailboxMaintenance",
    domain="admin",
    role="admin",
    title="Mailbox maintenance (operator)",
    description="status: content-free fleet counts and provider-index health (with userId, that "
    "mailbox's counts); retention: run one user's retention now; delete: one message of one "
    "user, blobs first.",
    input_schema=_obj(
        {
            "action": {"type": "string", "enum": ["status", "retention", "delete"]},
            "userId": {"type": "string", "minLength": 1, "maxLength": 64},
            "messageId": ID,
        },
        ("action",),
    ),
)
def admin_mailbox_maintenance(
    ctx: Context,
    action: str,
    userId: str | None = None,  # noqa: N803
    messageId: str | None = None,  # noqa: N803
) -> dict[str, Any]:
    if action == "status":
        return ops.status(userId)
    if not userId or (action == "delete" and not messageId):
        raise NotFound("Name the user (and, to delete, the message).")
    if action == "retention":
        return ops.retention(userId)
    return ops.delete(userId, str(messageId))
