"""System-mail retention: 90 days, at most 5,000 messages, blobs before rows.

One batch deletes the oldest messages that are past 90 days or above the cap (each blob
first; a failed blob delete keeps that message's rows for the next run), then delivery events
past 90 days, stale daily counters and orphan threads. Returns how many rows went.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from apps.mailbox.errors import BlobUnavailable
from apps.mailbox.models import SYSTEM_EMAIL_OWNER
from apps.mailbox.services import blobstore
from apps.system_email import models as m
from kody.blobs.keys import email_attachment_prefix, email_raw_prefix

log = logging.getLogger(__name__)

MAX_AGE = timedelta(days=90)
MESSAGE_CAP = 5000
COUNTER_DAYS = 7


@dataclass
class Batch:
    messages: int = 0
    blob_failures: int = 0
    events: int = 0
    counters: int = 0
    threads: int = 0

    @property
    def total(self) -> int:
        return self.messages + self.events + self.counters + self.threads


def _owned_key(key: str | None) -> str | None:
    """Only keys under the system owner's prefixes are ever deleted from here."""
    prefixes = (email_raw_prefix(SYSTEM_EMAIL_OWNER), email_attachment_prefix(SYSTEM_EMAIL_OWNER))
    return key if key and key.startswith(prefixes) else None


def _candidates(limit: int) -> list[m.SystemEmailMessage]:
    cutoff = timezone.now() - MAX_AGE
    old = list(m.SystemEmailMessage.objects.filter(created_at__lt=cutoff).order_by("created_at")[
        :limit
    ])  # fmt: skip
    over = m.SystemEmailMessage.objects.count() - MESSAGE_CAP - len(old)
    if over > 0 and len(old) < limit:
        seen = {msg.id for msg in old}
        extra = m.SystemEmailMessage.objects.exclude(id__in=seen).order_by("created_at", "id")
        old += list(extra[: min(over, limit - len(old))])
    return old


def _delete_message(msg: m.SystemEmailMessage) -> bool:
    keys = [_owned_key(msg.raw_mime_key)]
    keys += [_owned_key(k) for k in msg.attachments.values_list("storage_key", flat=True)]
    try:
        for key in filter(None, keys):
            blobstore.delete(key)
    except BlobUnavailable:
        log.warning("system email %s kept: blob delete failed", msg.id)
        return False
    with transaction.atomic():
        m.SystemEmailAttachment.objects.filter(message_id=msg.id).delete()
        m.SystemEmailDeliveryEvent.objects.filter(message_id=msg.id).update(message=None)
        m.SystemEmailMessage.objects.filter(id=msg.id).delete()
    return True


def prune_batch(limit: int) -> Batch:
    """One batch of each table (the lane runs them as separate ``kody.retention`` policies)."""
    done = Batch()
    done.messages, done.blob_failures = _prune_messages(limit)
    done.events = prune_events(limit)
    done.counters = prune_counters(limit)
    done.threads = prune_threads(limit)
    return done


def prune_messages(limit: int) -> int:
    """Messages deleted; one whose blob delete failed stays, and a batch with failures comes
    back short, so the lane does not spin on a blob store that is down."""
    return _prune_messages(limit)[0]


def _prune_messages(limit: int) -> tuple[int, int]:
    deleted = failed = 0
    for msg in _candidates(limit):
        if _delete_message(msg):
            deleted += 1
        else:
            failed += 1
    return deleted, failed


def prune_events(limit: int) -> int:
    event_ids = list(
        m.SystemEmailDeliveryEvent.objects.filter(created_at__lt=timezone.now() - MAX_AGE)
        .exclude(state__in=[m.InboundState.PENDING, m.InboundState.STORING])
        .values_list("id", flat=True)[:limit]
    )
    return m.SystemEmailDeliveryEvent.objects.filter(id__in=event_ids).delete()[0]


def prune_counters(limit: int) -> int:
    """Daily counters older than a week (a handful of rows a day: one delete takes them all)."""
    stale_day = timezone.now().date() - timedelta(days=COUNTER_DAYS)
    return m.SystemEmailDailyCounter.objects.filter(day__lt=stale_day).delete()[0]


def prune_threads(limit: int) -> int:
    used = m.SystemEmailMessage.objects.filter(thread__isnull=False).values("thread_id")
    orphan_ids = list(
        m.SystemEmailThread.objects.exclude(id__in=used).values_list("id", flat=True)[:limit]
    )
    return m.SystemEmailThread.objects.filter(id__in=orphan_ids).delete()[0]
