"""Operator-owned system mail for the reserved platform locals (kody, support, abuse, ...).

This dedicated graph is the only authority for ``system:email``: no user_id column (the owner
is implicit), never in a user's Mailbox actor, excluded from account deletion and export, and
pruned by its own retention lane (90 days, 5,000-message cap, blobs before rows). Columns mirror
the per-user Mailbox tables. Foreign keys use db_constraint=False; migration 0002 declares them
in the database with the original ON DELETE actions.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from kody.fields import text_id

INBOUND_PROVIDER = "cloudflare-email-routing"
DEDUPE_PROVIDER = "cloudflare-email-routing-dedupe"


class SystemEmailThread(models.Model):
    id = text_id()
    inbox = models.ForeignKey(
        "mailbox.EmailInbox",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        db_column="inbox_id",
        db_constraint=False,
        related_name="+",
    )
    subject_normalized = models.TextField(blank=True, default="")
    root_message_id_header = models.CharField(max_length=998, null=True, blank=True)
    last_message_at = models.DateTimeField()
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "system_email_threads"
        indexes = [
            models.Index(fields=["last_message_at"], name="system_email_threads_last_ix"),
            models.Index(fields=["root_message_id_header"], name="system_email_threads_root_ix"),
        ]

    def __str__(self) -> str:
        return self.subject_normalized or self.id


class Direction(models.TextChoices):
    INBOUND = "inbound"
    OUTBOUND = "outbound"


class ProcessingStatus(models.TextChoices):
    STORED = "stored"
    SENT = "sent"
    FAILED = "failed"


class Classification(models.TextChoices):
    ACCEPTED = "accepted"
    QUARANTINED = "quarantined"


class DeliveryStatus(models.TextChoices):
    DELIVERED = "delivered"
    DEFERRED = "deferred"
    BOUNCED = "bounced"
    FAILED = "failed"
    REJECTED = "rejected"
    COMPLAINED = "complained"


class SystemEmailMessage(models.Model):
    id = text_id()
    direction = models.CharField(max_length=8, choices=Direction.choices)
    inbox = models.ForeignKey(
        "mailbox.EmailInbox",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        db_column="inbox_id",
        db_constraint=False,
        db_index=False,  # covered by (inbox_id, created_at)
        related_name="+",
    )
    thread = models.ForeignKey(
        SystemEmailThread,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        db_column="thread_id",
        db_constraint=False,
        db_index=False,  # covered by (thread_id, created_at)
        related_name="messages",
    )
    sender_identity = models.ForeignKey(
        "mailbox.EmailSenderIdentity",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        db_column="sender_identity_id",
        db_constraint=False,
        related_name="+",
    )
    from_address = models.CharField(max_length=998)
    envelope_from = models.CharField(max_length=998, null=True, blank=True)
    to_addresses_json = models.JSONField(default=list, blank=True)
    cc_addresses_json = models.JSONField(default=list, blank=True)
    bcc_addresses_json = models.JSONField(default=list, blank=True)
    reply_to_addresses_json = models.JSONField(default=list, blank=True)
    subject = models.TextField(blank=True, default="")
    message_id_header = models.CharField(max_length=998, null=True, blank=True)
    in_reply_to_header = models.CharField(max_length=998, null=True, blank=True)
    references_json = models.JSONField(default=list, blank=True)
    headers_json = models.JSONField(default=dict, blank=True)
    auth_results = models.TextField(null=True, blank=True)
    text_body = models.TextField(null=True, blank=True)
    html_body = models.TextField(null=True, blank=True)
    raw_size = models.BigIntegerField(default=0)
    processing_status = models.CharField(max_length=8, choices=ProcessingStatus.choices)
    provider_message_id = models.CharField(max_length=255, null=True, blank=True)
    error = models.TextField(null=True, blank=True)
    received_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    raw_mime_key = models.CharField(max_length=512, null=True, blank=True)
    delivery_status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, null=True, blank=True
    )
    delivery_status_at = models.DateTimeField(null=True, blank=True)
    classification = models.CharField(
        max_length=16, choices=Classification.choices, default=Classification.ACCEPTED
    )
    classification_reason = models.TextField(null=True, blank=True)

    class Meta:
        db_table = "system_email_messages"
        indexes = [
            # Retention's age prune and the 5,000-message cap order by created_at.
            models.Index(fields=["created_at"], name="system_email_msgs_created_ix"),
            models.Index(fields=["inbox", "created_at"], name="system_email_msgs_inbox_ix"),
            models.Index(fields=["thread", "created_at"], name="system_email_msgs_thread_ix"),
            models.Index(fields=["message_id_header"], name="system_email_msgs_msgid_ix"),
            models.Index(
                fields=["created_at"],
                condition=Q(classification=Classification.QUARANTINED),
                name="system_email_msgs_quar_ix",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(direction__in=Direction.values), name="system_email_msgs_direction"
            ),
            models.CheckConstraint(
                condition=Q(processing_status__in=ProcessingStatus.values),
                name="system_email_msgs_processing",
            ),
            models.CheckConstraint(
                condition=Q(delivery_status__isnull=True)
                | Q(delivery_status__in=DeliveryStatus.values),
                name="system_email_msgs_delivery",
            ),
            models.CheckConstraint(
                condition=Q(classification__in=Classification.values),
                name="system_email_msgs_class",
            ),
            models.UniqueConstraint(
                fields=["provider_message_id"],
                condition=Q(direction=Direction.OUTBOUND, provider_message_id__isnull=False),
                name="system_email_msgs_provider_uq",
            ),
        ]

    def __str__(self) -> str:
        return self.subject or self.id


class StorageKind(models.TextChoices):
    RAW_MIME = "raw-mime"
    EXTERNAL = "external"
    UNAVAILABLE = "unavailable"


class SystemEmailAttachment(models.Model):
    id = text_id()
    message = models.ForeignKey(
        SystemEmailMessage,
        on_delete=models.CASCADE,
        db_column="message_id",
        db_constraint=False,
        related_name="attachments",
    )
    filename = models.CharField(max_length=1024, null=True, blank=True)
    content_type = models.CharField(max_length=255)
    content_id = models.CharField(max_length=998, null=True, blank=True)
    disposition = models.CharField(max_length=32, null=True, blank=True)
    size = models.BigIntegerField(default=0)
    storage_kind = models.CharField(max_length=16, choices=StorageKind.choices)
    storage_key = models.CharField(max_length=512, null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "system_email_attachments"
        constraints = [
            models.CheckConstraint(
                condition=Q(storage_kind__in=StorageKind.values),
                name="system_email_att_storage_kind",
            ),
        ]

    def __str__(self) -> str:
        return self.filename or self.id


class DeliveryEventType(models.TextChoices):
    RECEIVE_STARTED = "receive_started"
    RECEIVED = "received"
    REJECTED = "rejected"
    SEND_REQUESTED = "send_requested"
    SENT = "sent"
    FAILED = "failed"
    DELIVERED = "delivered"
    DEFERRED = "deferred"
    BOUNCED = "bounced"
    COMPLAINED = "complained"


class InboundState(models.TextChoices):
    PENDING = "pending"
    STORING = "storing"
    CLEANING = "cleaning"
    RECEIVED = "received"
    REJECTED = "rejected"
    ORPHAN_CLEANED = "orphan-cleaned"


class EffectState(models.TextChoices):
    PENDING = "pending"
    PROCESSING = "processing"
    COMPLETE = "complete"
    DEAD_LETTER = "dead-letter"


class SystemEmailDeliveryEvent(models.Model):
    """Delivery history plus the inbound ledger (lease, usage and subscription effects)."""

    id = text_id()
    message = models.ForeignKey(
        SystemEmailMessage,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        db_column="message_id",
        db_constraint=False,
        related_name="delivery_events",
    )
    inbox = models.ForeignKey(
        "mailbox.EmailInbox",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        db_column="inbox_id",
        db_constraint=False,
        related_name="+",
    )
    event_type = models.CharField(max_length=16, choices=DeliveryEventType.choices)
    provider = models.CharField(max_length=64, default="kody")
    provider_message_id = models.CharField(max_length=255, null=True, blank=True)
    provider_event_id = models.CharField(max_length=255, null=True, blank=True)
    detail_json = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    needs_effect_reconcile = models.BooleanField(default=True)
    usage_effect_recorded_at = models.DateTimeField(null=True, blank=True)
    usage_month = models.CharField(max_length=7, null=True, blank=True)
    usage_bytes = models.BigIntegerField(null=True, blank=True)
    usage_duration_ms = models.BigIntegerField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=InboundState.choices, null=True, blank=True)
    fingerprint = models.CharField(max_length=128, null=True, blank=True)
    storage_lease = models.CharField(max_length=64, null=True, blank=True)
    storage_lease_at = models.DateTimeField(null=True, blank=True)
    cleanup_lease = models.CharField(max_length=64, null=True, blank=True)
    cleanup_lease_at = models.DateTimeField(null=True, blank=True)
    cleanup_retry_at = models.DateTimeField(null=True, blank=True)
    expected_attachment_count = models.IntegerField(null=True, blank=True)
    finalization_token = models.CharField(max_length=64, null=True, blank=True)
    reconcile_after = models.DateTimeField(null=True, blank=True)
    dedupe_expires_at = models.DateTimeField(null=True, blank=True)
    usage_effect_suppressed_at = models.DateTimeField(null=True, blank=True)
    usage_started_at = models.DateTimeField(null=True, blank=True)
    usage_effect_retry_at = models.DateTimeField(null=True, blank=True)
    usage_effect_lease = models.CharField(max_length=64, null=True, blank=True)
    usage_effect_lease_at = models.DateTimeField(null=True, blank=True)
    subscription_effect_state = models.CharField(
        max_length=16, choices=EffectState.choices, null=True, blank=True
    )
    subscription_effect_lease = models.CharField(max_length=64, null=True, blank=True)
    subscription_effect_lease_at = models.DateTimeField(null=True, blank=True)
    subscription_effect_retry_at = models.DateTimeField(null=True, blank=True)
    subscription_effect_attempt_count = models.IntegerField(null=True, blank=True)
    subscription_effect_dead_letter_at = models.DateTimeField(null=True, blank=True)
    subscription_effect_last_error = models.TextField(null=True, blank=True)
    updated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "system_email_delivery_events"
        indexes = [
            # Retention prunes delivery events older than 90 days by created_at.
            models.Index(fields=["created_at"], name="system_email_events_created_ix"),
            models.Index(
                fields=["provider", "event_type", "created_at"],
                name="system_email_events_prov_ix",
            ),
            models.Index(
                fields=["created_at"],
                condition=Q(
                    provider=INBOUND_PROVIDER,
                    event_type=DeliveryEventType.RECEIVED,
                    needs_effect_reconcile=True,
                ),
                name="system_email_events_effects_ix",
            ),
            models.Index(
                fields=["usage_month"],
                condition=Q(
                    provider=INBOUND_PROVIDER,
                    event_type=DeliveryEventType.RECEIVED,
                    usage_effect_recorded_at__isnull=False,
                ),
                name="system_email_events_usage_ix",
            ),
            models.Index(
                fields=["state", "created_at", "id"],
                condition=Q(provider=INBOUND_PROVIDER, state__isnull=False),
                name="system_email_events_state_ix",
            ),
            models.Index(
                fields=["dedupe_expires_at", "id"],
                condition=Q(provider=DEDUPE_PROVIDER, dedupe_expires_at__isnull=False),
                name="system_email_events_dedupe_ix",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(event_type__in=DeliveryEventType.values),
                name="system_email_events_type",
            ),
            models.CheckConstraint(
                condition=Q(state__isnull=True) | Q(state__in=InboundState.values),
                name="system_email_events_state",
            ),
            models.CheckConstraint(
                condition=Q(subscription_effect_state__isnull=True)
                | Q(subscription_effect_state__in=EffectState.values),
                name="system_email_events_sub_state",
            ),
            models.UniqueConstraint(
                fields=["provider_event_id"],
                condition=Q(provider_event_id__isnull=False),
                name="system_email_events_provider_uq",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} {self.id}"


class SystemEmailDailyCounter(models.Model):
    """Fixed per-local daily receive counters for the reserved inboxes (not entitlements)."""

    # Surrogate id in place of PRIMARY KEY (local_part, day): admin cannot address composites.
    local_part = models.CharField(max_length=64)
    day = models.DateField(db_index=True)  # retention deletes stale days across locals
    count = models.IntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)
    # The delivery that counted last: as long as the delivery ledger's own id.
    operation_token = models.CharField(max_length=255, null=True, blank=True)

    class Meta:
        db_table = "system_email_daily_counters"
        constraints = [
            models.UniqueConstraint(fields=["local_part", "day"], name="system_email_counter_key"),
            models.CheckConstraint(condition=Q(count__gte=0), name="system_email_counter_count"),
        ]

    def __str__(self) -> str:
        return f"{self.local_part} {self.day}: {self.count}"


class SystemEmailGraphAuthority(models.Model):
    """Singleton marker: the dedicated tables are the sole authority, with no provider links."""

    singleton = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    authority = models.CharField(max_length=16, default="dedicated")
    cutover_at = models.DateTimeField(default=timezone.now)
    graph_mismatch_count = models.IntegerField(default=0)
    provider_link_count = models.IntegerField(default=0)

    class Meta:
        db_table = "system_email_graph_authority"
        constraints = [
            models.CheckConstraint(condition=Q(singleton=1), name="system_email_authority_one"),
            models.CheckConstraint(
                condition=Q(authority="dedicated"), name="system_email_authority_kind"
            ),
            models.CheckConstraint(
                condition=Q(graph_mismatch_count=0), name="system_email_authority_mismatch"
            ),
            models.CheckConstraint(
                condition=Q(provider_link_count=0), name="system_email_authority_links"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.authority} since {self.cutover_at:%Y-%m-%d}"


class OperatorAlert(models.Model):
    """One row per burst alert (``auth_denial``, ``email_delivery``): whether a burst is open.

    A lane run opens a burst with a conditional update (``active`` false → true) and mails the
    operators only when its own update changed the row, so two runs of one window mail once;
    the burst closes when a later hour falls back under the threshold. Counts only."""

    key = models.CharField(primary_key=True, max_length=64)
    active = models.BooleanField(default=False)
    burst_started_at = models.DateTimeField(null=True, blank=True)
    notified_at = models.DateTimeField(null=True, blank=True)
    last_count = models.IntegerField(default=0)
    last_baseline = models.FloatField(default=0)
    last_window_end = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "operator_alerts"

    def __str__(self) -> str:
        return f"{self.key} ({'burst' if self.active else 'quiet'})"
