"""The shared email configuration a person starts with: one inbox, its address, a sender."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists
from django.utils import timezone

from apps.accounts.models import User
from apps.mailbox.errors import MailboxWritesClosed
from apps.mailbox.models import (
    EmailInbox,
    EmailInboxAddress,
    EmailSenderIdentity,
    EmailUserGraphAuthority,
    SenderIdentityStatus,
)

DEFAULT_INBOX = "Inbox"


def address_of(user: User) -> str:
    return f"{user.username}@{settings.KODY_MAIL_DOMAIN}"


def require_graph_authority() -> None:
    """User email writes fail closed without the permanent authority marker."""
    if not EmailUserGraphAuthority.objects.filter(id=1).exists():
        raise MailboxWritesClosed()


def writable_inbox(user: User, **annotations: Any) -> EmailInbox:
    """``require_graph_authority`` + ``ensure_inbox`` in one query on the hot path (every
    inbound message): the inbox row, with the authority marker checked alongside, and
    ``annotations`` (inbound's sender rules) read in the same query. An inbox created here
    carries no annotations."""
    inbox = (
        EmailInbox.objects.filter(user_id=user.stable_user_id, name=DEFAULT_INBOX)
        .annotate(authority=Exists(EmailUserGraphAuthority.objects.filter(id=1)), **annotations)
        .first()
    )
    if inbox is None:
        require_graph_authority()
        return ensure_inbox(user)
    if not inbox.authority:
        raise MailboxWritesClosed()
    return inbox


def ensure_inbox(user: User) -> EmailInbox:
    inbox = EmailInbox.objects.filter(user_id=user.stable_user_id, name=DEFAULT_INBOX).first()
    if inbox is not None:
        return inbox
    try:
        with transaction.atomic():
            inbox = EmailInbox.objects.create(user_id=user.stable_user_id, name=DEFAULT_INBOX)
            address = address_of(user)
            EmailInboxAddress.objects.create(
                inbox=inbox,
                user_id=user.stable_user_id,
                address=address,
                local_part=user.username,
                domain=settings.KODY_MAIL_DOMAIN,
            )
    except IntegrityError:
        return EmailInbox.objects.get(user_id=user.stable_user_id, name=DEFAULT_INBOX)
    return inbox


def ensure_sender_identity(user: User) -> EmailSenderIdentity:
    """The platform address is a verified sender from the start."""
    identity, _ = EmailSenderIdentity.objects.get_or_create(
        user_id=user.stable_user_id,
        email=address_of(user),
        defaults={
            "domain": settings.KODY_MAIL_DOMAIN,
            "display_name": user.username,
            "status": SenderIdentityStatus.VERIFIED,
            "verified_at": timezone.now(),
        },
    )
    return identity


def list_inboxes(user: User) -> list[dict[str, object]]:
    ensure_inbox(user)
    rows = EmailInbox.objects.filter(user_id=user.stable_user_id).prefetch_related("addresses")
    return [
        {
            "id": inbox.id,
            "name": inbox.name,
            "description": inbox.description,
            "enabled": inbox.enabled,
            "packageId": inbox.package_id,
            "addresses": [a.address for a in inbox.addresses.all() if a.enabled],
        }
        for inbox in rows.order_by("created_at", "id")
    ]
