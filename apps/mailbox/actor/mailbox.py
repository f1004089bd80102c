"""The Mailbox actor: one user's email graph, inbound delivery ledger and retention.

Design note. Every method runs in the kernel's per-user transaction with the owner row locked,
so the ledger's compare-and-set steps are plain reads and writes: nothing else can touch this
mailbox meanwhile. Every public method first checks ``mailbox_owner_identity`` against the
calling user, and every blob key the graph stores is rebuilt from that owner and the row ids
(``kody.blobs.keys``) and compared, so a crafted key can never point into another user's
prefix. Blobs are deleted *before* their rows (a crash leaves a row without a blob, never a
blob without a row); a failed delete in retention writes an hourly retry for that message and
moves on. ``purge`` clears rows only: account deletion deletes blobs from ``blob_references``
first.

The class is assembled from one part per responsibility, each a module beside this one:
``inbound`` (the delivery ledger), ``outbound`` (writing and submitting mail), ``reading``
(the reads) and ``upkeep`` (deletion, export and import, the alarm's retention); ``common``
holds their limits, the owner-check decorators and the JSON shapes. The owner identity checks
every part relies on are here.
"""

from __future__ import annotations

from typing import Any

from apps.entitlements.services import metering
from apps.mailbox import errors
from apps.mailbox.actor import models as m
from apps.mailbox.actor.common import (  # noqa: F401  (the names callers import from here)
    _LEDGER_COLUMNS,
    INBOUND_PROVIDER,
    normalize_subject,
    summary,
)
from apps.mailbox.actor.inbound import InboundLedger
from apps.mailbox.actor.outbound import (  # noqa: F401  (the names callers import from here)
    OutboundMail,
    submission_key,
    write_provider_index,
)
from apps.mailbox.actor.reading import MailboxReads
from apps.mailbox.actor.upkeep import MailboxUpkeep
from apps.mailbox.actor.weight import UNBOUNDED
from kody.actors import Actor, OwnerMismatch
from kody.blobs.keys import email_attachment_key, email_raw_key


class Mailbox(InboundLedger, OutboundMail, MailboxReads, MailboxUpkeep, Actor):
    name = "mailbox.Mailbox"
    tables = (
        m.MailboxMeta,
        m.MailboxOwnerIdentity,
        m.EmailThread,
        m.EmailMessage,
        m.EmailAttachment,
        m.EmailDeliveryEvent,
        m.EmailOutboundProviderIndexRepair,
        m.EmailMessageRetentionRetry,
        m.EmailMessageDeletionTombstone,
    )

    # --- owner identity --------------------------------------------------------------------

    def _check_owner(self, found: str | None = None) -> None:
        """``found``: the owner id already read with another statement (None: read it here)."""
        if getattr(self, "_owner_checked", False):  # a method calling another, same call
            return
        if found is None:
            owner = m.MailboxOwnerIdentity.objects.filter(id=1).values_list("owner_id", flat=True)
            found = owner.first()
        if found is None and not self.context.read_only:
            # A read (``@reads``) of a mailbox nothing was written to records nothing: its
            # first write does.
            m.MailboxOwnerIdentity.objects.create(id=1, owner_id=self.user_id)
            m.MailboxMeta.objects.update_or_create(
                key="schema_version", defaults={"value": str(m.MAILBOX_VERSION)}
            )
        elif found is not None and found != self.user_id:
            raise OwnerMismatch("this mailbox belongs to another owner")
        self._owner_checked = True

    def _read_owner_and_ledger(self, delivery_id: str, stored_limit: int | None) -> None:
        """The owner check, the delivery's ledger row and (with ``stored_limit``) whether the
        mailbox already holds that many messages, in one statement. The row is kept for the
        method's first ``_ledger`` read; the owner is checked before the method runs."""
        probe = "NULL::boolean"
        params: list[Any] = []
        if stored_limit is not None:
            if int(stored_limit) <= 0:
                probe = "TRUE"
            else:  # reads at most ``stored_limit`` ids, never a COUNT of the whole mailbox
                probe = "EXISTS (SELECT 1 FROM email_messages OFFSET %s LIMIT 1)"
                params.append(int(stored_limit) - 1)
        sql = (
            f"SELECT {_LEDGER_COLUMNS}, o.owner_id AS mailbox_owner, {probe} AS mailbox_full"
            " FROM (SELECT 1) AS one"
            " LEFT JOIN mailbox_owner_identity o ON o.id = 1"
            " LEFT JOIN email_delivery_events e"
            " ON e.provider = %s AND e.provider_event_id = %s"
        )
        row = next(iter(m.EmailDeliveryEvent.objects.raw(sql, [*params, INBOUND_PROVIDER,
                                                                   str(delivery_id)])))  # fmt: skip
        self._check_owner(row.mailbox_owner)
        self._preread = (str(delivery_id), row if row.pk is not None else None)
        self._mailbox_full = row.mailbox_full

    # --- storage bytes (the same user's meter, inside this call's transaction) ---------------

    def _hold_storage(self, amount: int, limit: int) -> bool:
        """Reserve ``amount`` stored bytes against ``limit``; False when that would pass it.
        In this transaction: the bytes commit or roll back with the rows that weigh them."""
        if amount <= 0:
            self._release_storage(-amount)
            return True
        reply = metering.reserve_storage_bytes_in_call(self.context, amount, limit)
        self._storage_used = int(reply["bytes"])
        return bool(reply["allowed"])

    def _release_storage(self, amount: int) -> None:
        if amount > 0:
            metering.reserve_storage_bytes_in_call(self.context, -amount, 0)

    def _force_storage(self, amount: int) -> None:
        """Bring the meter to what was stored when it differs from what was held (a retried
        delivery reduced under a changed cap): the rows exist, so the meter follows them."""
        if amount > 0:
            metering.reserve_storage_bytes_in_call(self.context, amount, UNBOUNDED)
        else:
            self._release_storage(-amount)

    def _raw_key(self, message_id: str) -> str:
        return email_raw_key(self.user_id, message_id)

    def _check_raw_key(self, key: str | None, message_id: str) -> None:
        if key is not None and key != self._raw_key(message_id):
            raise errors.InvalidBlobKey(details={"key": "raw_mime_key"})

    def _check_attachment_key(self, att: dict[str, Any], message_id: str) -> None:
        if att.get("storage_kind") == "external":
            expected = email_attachment_key(self.user_id, message_id, att["id"])
            if att.get("storage_key") != expected:
                raise errors.InvalidBlobKey(details={"key": "storage_key"})
        elif att.get("storage_key"):
            raise errors.InvalidBlobKey(details={"key": "storage_key"})

    def _message(self, message_id: str) -> m.EmailMessage:
        found = m.EmailMessage.objects.filter(id=str(message_id)).first()
        if found is None:
            raise errors.MessageNotFound(details={"messageId": message_id})
        return found
