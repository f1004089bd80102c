"""The Mailbox actor's tables in each user's schema (SCHEMA.md §2.2, Mailbox schema v5).

No user_id column: the schema is the user. ``mailbox_owner_identity`` repeats the owner so blob
keys can be validated against it. Ids are plain text columns, not foreign keys: the actor
deletes children itself (attachments before messages, blobs before rows).
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from kody.userschema import ActorModel

# The per-user schema version that brought the Mailbox tables.
MAILBOX_SCHEMA = 5  # 4 is the jobs actors'; a v4 schema from either branch upgrades to both
# The original's Mailbox schema version this actor implements (recorded in mailbox_meta).
MAILBOX_VERSION = 5

DIRECTIONS = ("inbound", "outbound")
PROCESSING = ("stored", "sent", "failed")
CLASSIFICATIONS = ("accepted", "quarantined")
DELIVERY_STATUSES = ("delivered", "deferred", "bounced", "failed", "rejected", "complained")
STORAGE_KINDS = ("raw-mime", "external", "unavailable")
EVENT_TYPES = (
    "receive_started",
    "received",
    "rejected",
    "send_requested",
    "sent",
    "failed",
    "delivered",
    "deferred",
    "bounced",
    "complained",
)
LEDGER_STATES = ("pending", "storing", "cleaning", "received", "rejected", "orphan-cleaned")


def _text(**kwargs: object) -> models.TextField:
    return models.TextField(null=True, **kwargs)  # noqa: DJ001 (the original's nullable text)


class MailboxMeta(ActorModel):
    key = models.CharField(max_length=64, primary_key=True, db_collation="C")
    value = models.TextField()

    actor_version = MAILBOX_SCHEMA

    class Meta:
        db_table = "mailbox_meta"


class MailboxOwnerIdentity(ActorModel):
    """Singleton: the owner every call and every blob key is checked against."""

    id = models.SmallIntegerField(primary_key=True, default=1)
    owner_id = models.CharField(max_length=64)
    created_at = models.DateTimeField(db_default=Now())

    actor_version = MAILBOX_SCHEMA

    class Meta:
        db_table = "mailbox_owner_identity"
        constraints = [models.CheckConstraint(condition=Q(id=1), name="mailbox_owner_singleton")]


class EmailThread(ActorModel):
    id = models.CharField(max_length=64, primary_key=True, db_collation="C")
    inbox_id = models.CharField(max_length=64)
    subject_normalized = models.TextField(default="")
    root_message_id_header = _text()
    last_message_at = models.DateTimeField()
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    actor_version = MAILBOX_SCHEMA

    class Meta:
        db_table = "email_threads"
        # No secondary index: threads are read by id only (docs/architecture/actor-indexes.md).


class EmailMessage(ActorModel):
    id = models.CharField(max_length=64, primary_key=True, db_collation="C")
    direction = models.CharField(max_length=8)
    inbox_id = models.CharField(max_length=64)
    thread_id = models.CharField(max_length=64, null=True)  # noqa: DJ001
    sender_identity_id = models.CharField(max_length=64, null=True)  # noqa: DJ001
    from_address = models.TextField(default="")
    envelope_from = _text()
    to_addresses_json = models.JSONField(default=list)
    cc_addresses_json = models.JSONField(default=list)
    bcc_addresses_json = models.JSONField(default=list)
    reply_to_addresses_json = models.JSONField(default=list)
    subject = models.TextField(default="")
    message_id_header = _text()
    in_reply_to_header = _text()
    references_json = models.JSONField(default=list)
    headers_json = models.JSONField(default=list)
    auth_results = _text()
    text_body = _text()
    html_body = _text()
    raw_mime_key = _text()
    raw_size = models.BigIntegerField(default=0)
    # MIME defects the standard library reported; a non-empty list marks malformed mail.
    mime_defects_json = models.JSONField(default=list)
    processing_status = models.CharField(max_length=8)
    classification = models.CharField(max_length=16, default="accepted")
    classification_reason = _text()
    provider_message_id = models.CharField(max_length=255, null=True)  # noqa: DJ001
    delivery_status = models.CharField(max_length=16, null=True)  # noqa: DJ001
    delivery_status_at = models.DateTimeField(null=True)
    error = _text()
    received_at = models.DateTimeField(null=True)
    sent_at = models.DateTimeField(null=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    actor_version = MAILBOX_SCHEMA

    class Meta:
        db_table = "email_messages"
        indexes = [
            models.Index(fields=["created_at", "id"], name="email_messages_created_ix"),
            models.Index(fields=["inbox_id", "created_at", "id"], name="email_messages_inbox_ix"),
            models.Index(fields=["thread_id", "created_at", "id"], name="email_messages_thread_ix"),
            models.Index(
                fields=["classification", "created_at", "id"], name="email_messages_class_ix"
            ),
            models.Index(fields=["message_id_header"], name="email_messages_msgid_ix"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(direction__in=DIRECTIONS), name="email_messages_direction"
            ),
            models.CheckConstraint(
                condition=Q(processing_status__in=PROCESSING), name="email_messages_processing"
            ),
            models.CheckConstraint(
                condition=Q(classification__in=CLASSIFICATIONS), name="email_messages_class"
            ),
            models.CheckConstraint(
                condition=Q(delivery_status__isnull=True)
                | Q(delivery_status__in=DELIVERY_STATUSES),
                name="email_messages_delivery",
            ),
            models.UniqueConstraint(
                fields=["provider_message_id"],
                condition=Q(direction="outbound", provider_message_id__isnull=False),
                name="email_messages_provider_uq",
            ),
        ]


class EmailAttachment(ActorModel):
    id = models.CharField(max_length=64, primary_key=True, db_collation="C")
    message_id = models.CharField(max_length=64, db_index=True)
    filename = _text()
    content_type = models.CharField(max_length=255)
    content_id = _text()
    disposition = models.CharField(max_length=32, null=True)  # noqa: DJ001
    size = models.BigIntegerField(default=0)
    storage_kind = models.CharField(max_length=16)
    storage_key = _text()
    # Position among the MIME leaf parts, so a raw-mime attachment is found again on read.
    part_index = models.IntegerField(null=True)
    created_at = models.DateTimeField()

    actor_version = MAILBOX_SCHEMA

    class Meta:
        db_table = "email_attachments"
        constraints = [
            models.CheckConstraint(
                condition=Q(storage_kind__in=STORAGE_KINDS), name="email_attachments_kind"
            ),
        ]


class EmailDeliveryEvent(ActorModel):
    """Delivery history and, for inbound mail, the delivery ledger (one row per delivery id)."""

    id = models.CharField(max_length=64, primary_key=True, db_collation="C")
    message_id = models.CharField(max_length=64, null=True, db_index=True)  # noqa: DJ001
    inbox_id = models.CharField(max_length=64, null=True)  # noqa: DJ001
    event_type = models.CharField(max_length=16)
    provider = models.CharField(max_length=64, default="kody")
    provider_message_id = models.CharField(max_length=255, null=True)  # noqa: DJ001
    provider_event_id = models.CharField(max_length=255, null=True)  # noqa: DJ001
    detail_json = models.JSONField(default=dict)
    needs_effect_reconcile = models.BooleanField(default=False)
    state = models.CharField(max_length=16, null=True)  # noqa: DJ001
    fingerprint = models.CharField(max_length=128, null=True)  # noqa: DJ001
    storage_lease = models.CharField(max_length=64, null=True)  # noqa: DJ001
    storage_lease_at = models.DateTimeField(null=True)
    cleanup_lease = models.CharField(max_length=64, null=True)  # noqa: DJ001
    cleanup_lease_at = models.DateTimeField(null=True)
    cleanup_retry_at = models.DateTimeField(null=True)
    expected_attachment_count = models.IntegerField(null=True)
    finalization_token = models.CharField(max_length=64, null=True)  # noqa: DJ001
    reconcile_after = models.DateTimeField(null=True)
    dedupe_expires_at = models.DateTimeField(null=True)
    usage_effect_recorded_at = models.DateTimeField(null=True)
    usage_started_at = models.DateTimeField(null=True)
    usage_effect_retry_at = models.DateTimeField(null=True)
    usage_effect_lease = models.CharField(max_length=64, null=True)  # noqa: DJ001
    usage_effect_lease_at = models.DateTimeField(null=True)
    subscription_effect_state = models.CharField(max_length=16, null=True)  # noqa: DJ001
    subscription_effect_lease = models.CharField(max_length=64, null=True)  # noqa: DJ001
    subscription_effect_lease_at = models.DateTimeField(null=True)
    subscription_effect_retry_at = models.DateTimeField(null=True)
    subscription_effect_attempt_count = models.IntegerField(null=True)
    subscription_effect_dead_letter_at = models.DateTimeField(null=True)
    subscription_effect_last_error = _text()
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    actor_version = MAILBOX_SCHEMA

    class Meta:
        db_table = "email_delivery_events"
        indexes = [
            models.Index(fields=["created_at", "id"], name="email_events_created_ix"),
            models.Index(
                fields=["state", "reconcile_after"],
                condition=Q(state__in=["pending", "storing"]),
                name="email_events_ledger_ix",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(event_type__in=EVENT_TYPES), name="email_events_type"
            ),
            models.CheckConstraint(
                condition=Q(state__isnull=True) | Q(state__in=LEDGER_STATES),
                name="email_events_state",
            ),
            models.UniqueConstraint(
                fields=["provider", "provider_event_id"],
                condition=Q(provider_event_id__isnull=False),
                name="email_events_provider_uq",
            ),
        ]


class EmailOutboundProviderIndexRepair(ActorModel):
    """An accepted send whose public reverse-index row still has to be written."""

    pk = models.CompositePrimaryKey("provider", "provider_message_id")
    provider = models.CharField(max_length=64)
    provider_message_id = models.CharField(max_length=255)
    message_id = models.CharField(max_length=64)
    inbox_id = models.CharField(max_length=64)
    retry_at = models.DateTimeField(db_index=True)
    attempt_count = models.IntegerField(default=0)
    last_error = _text()

    actor_version = MAILBOX_SCHEMA

    class Meta:
        db_table = "email_outbound_provider_index_repairs"


class EmailMessageRetentionRetry(ActorModel):
    """A message whose blob delete failed during retention; retried hourly, never blocking."""

    message_id = models.CharField(max_length=64, primary_key=True, db_collation="C")
    retry_at = models.DateTimeField(db_index=True)
    attempt_count = models.IntegerField(default=0)
    last_error = _text()

    actor_version = MAILBOX_SCHEMA

    class Meta:
        db_table = "email_message_retention_retries"


class EmailMessageDeletionTombstone(ActorModel):
    message_id = models.CharField(max_length=64, primary_key=True, db_collation="C")
    deleted_at = models.DateTimeField()

    actor_version = MAILBOX_SCHEMA

    class Meta:
        db_table = "email_message_deletion_tombstones"
