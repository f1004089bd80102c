"""Scheduled inbound reconciliation: visit owners whose deliveries may be stuck mid-way.

Each claim leaves its owner a row in ``email_inbound_due_owners`` (due when its storing lease
goes stale). The ``reconcile_inbound_deliveries`` lane pages those rows by due time, then
owner, and asks each owner's Mailbox to settle its stale deliveries (``reconcile_inbound``):
a committed graph is finalized as received; anything else (lease expired, charged but never
committed) has its blob deleted and waits for a redelivery, which is not charged again. The
Mailbox then moves the hint to its next unsettled delivery or drops it, in the same
transaction. A visit that fails backs off on the row (``attempt_count``, ``last_error``)
without blocking the owners behind it. Every step is idempotent: visiting twice is harmless.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import F
from django.utils import timezone

from apps.mailbox.actor import Mailbox
from apps.mailbox.models import EmailInboundDueOwner
from kody.errors import AccountDeleting
from kody.userschema.accounts import NoLiveAccount

log = logging.getLogger(__name__)
BACKOFF_BASE = timedelta(minutes=5)
BACKOFF_MAX = timedelta(hours=6)


@dataclass(frozen=True)
class Pass:
    visited: int = 0
    failed: int = 0


def due_owners(limit: int, now: datetime) -> list[str]:
    return list(
        EmailInboundDueOwner.objects.filter(due_at__lte=now)
        .order_by("due_at", "user_id")
        .values_list("user_id", flat=True)[:limit]
    )


def reconcile_due(limit: int, now: datetime | None = None) -> Pass:
    """Visit up to ``limit`` due owners, earliest first."""
    now = now or timezone.now()
    visited = failed = 0
    for user_id in due_owners(limit, now):
        visited += 1
        try:
            Mailbox.call(user_id, "reconcile_inbound")
        except (NoLiveAccount, AccountDeleting):
            # The account is gone or going: its deletion removes the rest of its mail.
            EmailInboundDueOwner.objects.filter(user_id=user_id).delete()
        except Exception as exc:
            failed += 1
            _back_off(user_id, now, exc)
    return Pass(visited, failed)


def _back_off(user_id: str, now: datetime, exc: Exception) -> None:
    row = EmailInboundDueOwner.objects.filter(user_id=user_id).first()
    attempts = row.attempt_count if row else 0
    delay = min(BACKOFF_MAX, BACKOFF_BASE * 2**attempts)
    log.warning(
        "inbound reconcile for an owner failed (%s); attempt %s, next in %s",
        type(exc).__name__,
        attempts + 1,
        delay,
    )
    # The class name only: exception messages can quote mail content.
    EmailInboundDueOwner.objects.filter(user_id=user_id).update(
        due_at=now + delay,
        attempt_count=F("attempt_count") + 1,
        last_error=type(exc).__name__,
        updated_at=now,
    )
