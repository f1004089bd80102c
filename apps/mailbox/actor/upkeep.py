"""The Mailbox's upkeep: deleting, exporting, importing and purging a mailbox, and the alarm's
retention, index repairs and stale-delivery reconcile."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Min
from django.utils import timezone

from apps.mailbox import errors
from apps.mailbox.actor import models as m
from apps.mailbox.actor.common import (
    BATCH,
    BLOB_MESSAGES_PER_PASS,
    CONTINUATION_DELAY,
    DUE_OWNERS,
    EVENT_RETENTION,
    EXPORT_SECTIONS,
    INBOUND_PROVIDER,
    INDEX_REPAIR_BACKOFF,
    MESSAGE_RETENTION,
    RETRY_DELAY,
    _decode_cursor,
    _encode_cursor,
    _iso,
    _limit,
    _row,
    _section_model,
    owned,
)
from apps.mailbox.actor.outbound import write_provider_index
from apps.mailbox.actor.weight import stored_weight
from apps.mailbox.models import (
    EmailInboundDueOwner,
    EmailOutboundProviderIndex,
)
from apps.mailbox.services import blobstore
from kody.actors import deletion_safe
from kody.blobs.keys import email_attachment_key


class MailboxUpkeep:
    """Mailbox methods that remove, move or expire a mailbox's data."""

    # --- deletion -------------------------------------------------------------------------

    def _message_blob_keys(self, msg: m.EmailMessage) -> list[str]:
        keys = [self._raw_key(msg.id)] if msg.raw_mime_key else []
        for att_id in m.EmailAttachment.objects.filter(
            message_id=msg.id, storage_kind="external"
        ).values_list("id", flat=True):
            keys.append(email_attachment_key(self.user_id, msg.id, att_id))
        return keys

    def _delete_rows(self, message_id: str) -> int:
        """Delete one message's rows; returns what they weighed against storage_bytes, for the
        caller to give back to the meter in this same transaction."""
        freed = stored_weight([message_id])
        m.EmailAttachment.objects.filter(message_id=message_id).delete()
        m.EmailMessageRetentionRetry.objects.filter(message_id=message_id).delete()
        m.EmailOutboundProviderIndexRepair.objects.filter(message_id=message_id).delete()
        m.EmailDeliveryEvent.objects.filter(message_id=message_id).update(message_id=None)
        m.EmailMessage.objects.filter(id=message_id).delete()
        EmailOutboundProviderIndex.objects.filter(
            user_id=self.user_id, message_id=message_id
        ).delete()
        return freed

    @owned
    def delete_message(self, message_id: str) -> dict[str, Any]:
        """Delete one message: its blobs first (a failure keeps the row), then its rows."""
        msg = self._message(message_id)
        for key in self._message_blob_keys(msg):
            blobstore.delete(key)  # raises BlobUnavailable: nothing is deleted
        # Released with the delete, in its transaction: freed exactly when the rows go.
        self._release_storage(self._delete_rows(msg.id))
        m.EmailMessageDeletionTombstone.objects.update_or_create(
            message_id=msg.id, defaults={"deleted_at": timezone.now()}
        )
        return {"deleted": True, "messageId": msg.id}

    @deletion_safe
    @owned
    def blob_references(self, cursor: str | None = None, limit: int = 500) -> dict[str, Any]:
        after = _decode_cursor(cursor, 1)
        size = _limit(limit, 500)
        rows = m.EmailMessage.objects.order_by("id")
        if after is not None:
            rows = rows.filter(id__gt=after[0])
        # Ids and keys only, and one attachment query for the whole page rather than one per
        # message: the page runs in the shard's batch transaction, and every call batched with
        # it waits for it to commit.
        found = list(rows.values_list("id", "raw_mime_key")[: size + 1])
        more = len(found) > size
        found = found[:size]
        external: dict[str, list[str]] = {}
        for message_id, att_id in (
            m.EmailAttachment.objects.filter(
                message_id__in=[message_id for message_id, _ in found], storage_kind="external"
            )
            .order_by("message_id", "id")
            .values_list("message_id", "id")
        ):
            external.setdefault(message_id, []).append(att_id)
        refs = []
        for message_id, raw_key in found:
            if raw_key:
                refs.append({"bucket": "email_blobs", "key": self._raw_key(message_id)})
            for att_id in external.get(message_id, ()):
                key = email_attachment_key(self.user_id, message_id, att_id)
                refs.append({"bucket": "email_blobs", "key": key})
        return {"references": refs, "next_cursor": _encode_cursor(found[-1][0]) if more else None}

    @deletion_safe
    @owned
    def export_pages(self, cursor: str | None = None, limit: int = 500) -> dict[str, Any]:
        """One keyset page of one section (threads, messages, attachments, delivery events)."""
        position = _decode_cursor(cursor, 2) or [EXPORT_SECTIONS[0], ""]
        section, after = position
        model = _section_model(section)
        size = _limit(limit, 500)
        found = list(model.objects.filter(id__gt=after).order_by("id")[: size + 1])
        rows = [_row(r) for r in found[:size]]
        for row in rows:
            for lease in ("storage_lease", "cleanup_lease", "finalization_token"):
                row.pop(lease, None)
        if len(found) > size:
            next_cursor = _encode_cursor(section, found[size - 1].id)
        else:
            index = EXPORT_SECTIONS.index(section)
            nxt = EXPORT_SECTIONS[index + 1] if index + 1 < len(EXPORT_SECTIONS) else None
            next_cursor = _encode_cursor(nxt, "") if nxt else None
        return {"section": section, "rows": rows, "next_cursor": next_cursor}

    @owned
    def import_page(self, page: dict[str, Any]) -> dict[str, Any]:
        """Restore one ``export_pages`` page (``import_account``), sections in export order so
        parents come first. Rows keep their ids (blob keys embed them); a row already here is
        left alone, so a rerun of the same page changes nothing. The stale-delivery and
        retention clocks start again from now."""
        section = page.get("section")
        model = _section_model(section)
        fields = model._meta.concrete_fields
        objects = [
            model(**{f.attname: row[f.column] for f in fields if f.column in row})
            for row in page.get("rows", [])
        ]
        for obj in objects:
            # Blob keys come from this owner and the row's ids, never from the archive: a key
            # read from it could name another account's bytes.
            if isinstance(obj, m.EmailMessage) and obj.raw_mime_key:
                obj.raw_mime_key = self._raw_key(obj.id)
            elif isinstance(obj, m.EmailAttachment):
                external = obj.storage_kind == "external"
                obj.storage_key = (
                    email_attachment_key(self.user_id, obj.message_id, obj.id) if external else None
                )
        model.objects.bulk_create(objects, ignore_conflicts=True)
        if section == "messages" and objects:
            self.set_alarm(timezone.now() + MESSAGE_RETENTION)
        return {"imported": {model._meta.db_table: len(objects)}}

    @deletion_safe
    @owned
    def purge(self) -> dict[str, Any]:
        """Clear every Mailbox row and the alarm; never blobs (deletion removed those first)."""
        deleted: dict[str, int] = {}
        for model in (
            m.EmailAttachment,
            m.EmailMessageRetentionRetry,
            m.EmailOutboundProviderIndexRepair,
            m.EmailMessageDeletionTombstone,
            m.EmailDeliveryEvent,
            m.EmailMessage,
            m.EmailThread,
            m.MailboxMeta,
        ):
            deleted[model._meta.db_table], _ = model.objects.all().delete()
        self.clear_alarm()
        return {"deleted": deleted}

    # --- retention, index repairs and stale deliveries (the alarm) --------------------------

    @owned
    def run_retention_now(self) -> dict[str, Any]:
        before = self.count()
        result = self._maintain(timezone.now())
        return {"before": before, "after": self.count(), **result}

    def alarm(self) -> None:
        self._check_owner()
        self._maintain(timezone.now())

    def _maintain(self, now: datetime) -> dict[str, Any]:
        failures, remaining = self._expire_messages(now)
        events = self._expire_events(now)
        threads = self._prune_orphan_threads()
        self._repair_index(now)
        self._reconcile_stale(now)
        more = remaining or events == BATCH or threads == BATCH
        self._schedule(now, continuation=more)
        return {"blobDeleteFailures": failures, "expiredRemaining": remaining}

    def _expire_messages(self, now: datetime) -> tuple[int, int]:
        cutoff = now - MESSAGE_RETENTION
        waiting = m.EmailMessageRetentionRetry.objects.filter(retry_at__gt=now).values("message_id")
        candidates = m.EmailMessage.objects.filter(created_at__lt=cutoff).exclude(id__in=waiting)
        failures = freed = 0
        for msg in list(candidates.order_by("created_at", "id")[:BLOB_MESSAGES_PER_PASS]):
            try:
                for key in self._message_blob_keys(msg):
                    blobstore.delete(key)
            except errors.BlobUnavailable as exc:
                failures += 1
                retry, _ = m.EmailMessageRetentionRetry.objects.get_or_create(
                    message_id=msg.id, defaults={"retry_at": now + RETRY_DELAY}
                )
                retry.retry_at = now + RETRY_DELAY
                retry.attempt_count += 1
                retry.last_error = exc.message
                retry.save()
                continue
            freed += self._delete_rows(msg.id)
        self._release_storage(freed)  # one meter statement for the whole pass
        return failures, candidates.count()

    def _expire_events(self, now: datetime) -> int:
        cutoff = now - EVENT_RETENTION
        ids = list(
            m.EmailDeliveryEvent.objects.filter(created_at__lt=cutoff)
            .exclude(state__in=("pending", "storing", "cleaning"))
            .order_by("created_at", "id")
            .values_list("id", flat=True)[:BATCH]
        )
        m.EmailDeliveryEvent.objects.filter(id__in=ids).delete()
        m.EmailMessageDeletionTombstone.objects.filter(deleted_at__lt=cutoff).delete()
        return len(ids)

    def _prune_orphan_threads(self) -> int:
        used = m.EmailMessage.objects.filter(thread_id__isnull=False).values("thread_id")
        ids = list(
            m.EmailThread.objects.exclude(id__in=used)
            .order_by("id")
            .values_list("id", flat=True)[:BATCH]
        )
        m.EmailThread.objects.filter(id__in=ids).delete()
        return len(ids)

    def _repair_index(self, now: datetime) -> None:
        for repair in m.EmailOutboundProviderIndexRepair.objects.filter(retry_at__lte=now)[:BATCH]:
            try:
                write_provider_index(
                    self.user_id,
                    repair.provider,
                    repair.provider_message_id,
                    repair.message_id,
                    repair.inbox_id,
                )
            except Exception as exc:  # the public index is down: back off, never resend
                step = INDEX_REPAIR_BACKOFF[
                    min(repair.attempt_count, len(INDEX_REPAIR_BACKOFF) - 1)
                ]
                repair.attempt_count += 1
                repair.retry_at = now + timedelta(seconds=step)
                repair.last_error = str(exc)[:500]
                repair.save()
                continue
            m.EmailOutboundProviderIndexRepair.objects.filter(
                provider=repair.provider, provider_message_id=repair.provider_message_id
            ).delete()
        self._publish_repair_health()

    @owned
    def reconcile_inbound(self) -> dict[str, Any]:
        """The ``reconcile_inbound_deliveries`` lane's visit: settle stale deliveries, move the
        owner's due-owner hint to the next one (or drop it), and schedule the next alarm."""
        now = timezone.now()
        settled, next_due = self._reconcile_stale(now)
        self._schedule(now, continuation=False)
        return {"settled": settled, "nextDueAt": _iso(next_due)}

    def _reconcile_stale(self, now: datetime) -> tuple[int, datetime | None]:
        """A delivery stuck mid-way (its lease expired, charged but never committed): finalize
        it if its graph committed, else delete its blob so nothing is orphaned (a later
        redelivery starts over and is not charged again). Then the due-owner hint follows
        what is left; the number settled and the next due time are returned."""
        stale = m.EmailDeliveryEvent.objects.filter(
            provider=INBOUND_PROVIDER, state__in=("pending", "storing"), reconcile_after__lte=now
        )
        settled = 0
        for ev in stale[:BATCH]:
            settled += 1
            message_id = ev.detail_json.get("messageId")
            if message_id and m.EmailMessage.objects.filter(id=message_id).exists():
                # Committed by an older commit whose separate finalize was lost: received.
                self._finalize(ev, message_id, ev.storage_lease, now)
                continue
            try:
                if message_id:
                    blobstore.delete(self._raw_key(message_id))
            except errors.BlobUnavailable:
                ev.reconcile_after = now + RETRY_DELAY
                ev.save(update_fields=["reconcile_after"])
                continue
            self._give_back_held(ev)  # its blob is gone and no row will weigh it
            ev.state = "orphan-cleaned"
            ev.storage_lease = None
            ev.reconcile_after = None
            ev.updated_at = now
            ev.save()
        return settled, self._sync_due(now)

    def _sync_due(self, now: datetime) -> datetime | None:
        """The due-owner hint: the earliest unsettled delivery's reconcile time, or no row."""
        next_due = m.EmailDeliveryEvent.objects.filter(
            provider=INBOUND_PROVIDER, state__in=("pending", "storing")
        ).aggregate(t=Min("reconcile_after"))["t"]
        if next_due is None:
            EmailInboundDueOwner.objects.filter(user_id=self.user_id).delete()
            return None
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {DUE_OWNERS} (user_id, due_at, reason, attempt_count, created_at,"
                " updated_at) VALUES (%s, %s, 'inbound_delivery', 0, %s, %s)"
                " ON CONFLICT (user_id) DO UPDATE SET due_at = EXCLUDED.due_at,"
                " attempt_count = 0, last_error = NULL, updated_at = EXCLUDED.updated_at",
                [self.user_id, next_due, now, now],
            )
        return next_due

    def _schedule(self, now: datetime, *, continuation: bool) -> None:
        if continuation:
            self.set_alarm(now + CONTINUATION_DELAY)
            return
        times = [
            m.EmailMessage.objects.aggregate(t=Min("created_at"))["t"],
            m.EmailDeliveryEvent.objects.exclude(state__in=("pending", "storing")).aggregate(
                t=Min("created_at")
            )["t"],
            m.EmailMessageRetentionRetry.objects.aggregate(t=Min("retry_at"))["t"],
            m.EmailOutboundProviderIndexRepair.objects.aggregate(t=Min("retry_at"))["t"],
            m.EmailDeliveryEvent.objects.filter(state__in=("pending", "storing")).aggregate(
                t=Min("reconcile_after")
            )["t"],
        ]
        due = []
        if times[0]:
            due.append(times[0] + MESSAGE_RETENTION)
        if times[1]:
            due.append(times[1] + EVENT_RETENTION)
        due.extend(t for t in times[2:] if t)
        if due:
            self.set_alarm(max(min(due), now + CONTINUATION_DELAY))
