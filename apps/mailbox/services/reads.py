"""A person's own mail: every function takes the caller and talks only to their Mailbox —
its reads, and the two changes a reader makes to a message (``classify``, ``delete_message``)."""

from __future__ import annotations

import base64
from typing import Any

from apps.accounts.models import User
from apps.mailbox.actor import Mailbox
from apps.mailbox.errors import AttachmentNotFound, AttachmentUnavailable, MessageNotFound
from apps.mailbox.services import blobstore, mime
from kody.userschema.schemas import has_actor_state


def _call(user: User, method: str, **kwargs: Any) -> Any:
    return Mailbox.call(user.stable_user_id, method, **kwargs)


def _no_mail_yet(user: User) -> bool:
    """The Mailbox never ran for this person: its tables come with the first mail, so a read
    answers what the empty tables would, without creating them (issue 16)."""
    return not has_actor_state(user.stable_user_id, Mailbox.name)


def _absent(message_id: str) -> MessageNotFound:
    return MessageNotFound(details={"messageId": message_id})


def list_messages(user: User, **filters: Any) -> dict[str, Any]:
    if filters.get("cursor") is None and _no_mail_yet(user):
        return {"messages": [], "nextCursor": None}
    return _call(user, "list_messages", **filters)


def search(user: User, query: str, limit: int | None = None, cursor: str | None = None) -> Any:
    if cursor is None and _no_mail_yet(user):
        return {"messages": [], "nextCursor": None}
    return _call(user, "search_messages", query=query, limit=limit, cursor=cursor)


def get_message(user: User, message_id: str) -> dict[str, Any]:
    if _no_mail_yet(user):
        raise _absent(message_id)
    return _call(user, "get_message", message_id=message_id)


def delivery_events(user: User, **filters: Any) -> dict[str, Any]:
    if _no_mail_yet(user):
        if filters.get("message_id"):
            raise _absent(filters["message_id"])
        if filters.get("cursor") is None:
            return {"events": [], "nextCursor": None}
    return _call(user, "list_delivery_events", **filters)


def classify(user: User, message_id: str, classification: str, reason: str | None) -> Any:
    if _no_mail_yet(user):
        raise _absent(message_id)
    return _call(
        user, "classify", message_id=message_id, classification=classification, reason=reason
    )


def delete_message(user: User, message_id: str) -> dict[str, Any]:
    if _no_mail_yet(user):
        raise _absent(message_id)
    return _call(user, "delete_message", message_id=message_id)


# Mailbox.count of a mailbox that never got mail: what its empty tables would answer.
NO_MAIL = {
    "threads": 0,
    "messages": 0,
    "attachments": 0,
    "deliveryEvents": 0,
    "pendingIndexRepairs": 0,
    "retentionRetries": 0,
}


def count(user: User) -> dict[str, int]:
    if _no_mail_yet(user):
        return dict(NO_MAIL)
    return _call(user, "count")


def attachment(user: User, message_id: str, attachment_id: str) -> dict[str, Any]:
    """The attachment's metadata and bytes (base64), re-parsed from the owner's own raw MIME."""
    if _no_mail_yet(user):
        raise _absent(message_id)
    found = _call(user, "locate_attachment", message_id=message_id, attachment_id=attachment_id)
    if found["storageKind"] == "unavailable" or "key" not in found:
        raise AttachmentUnavailable(details={"attachmentId": attachment_id})
    data = blobstore.get(found["key"])
    if found["storageKind"] == "raw-mime":
        parts = mime.leaves(mime.load(data))
        index = found["partIndex"]
        if index is None or index >= len(parts):
            raise AttachmentNotFound(details={"attachmentId": attachment_id})
        data = mime.part_bytes(parts[index])
    meta = {k: v for k, v in found.items() if k not in ("key", "partIndex")}
    return {**meta, "contentBase64": base64.b64encode(data).decode()}


def stored_message_count(user_id: str) -> int:
    """The ``stored_email_messages`` counter: the Mailbox is the authority (none yet: 0)."""
    if not has_actor_state(user_id, Mailbox.name):
        return 0
    return int(Mailbox.call(user_id, "count")["messages"])
