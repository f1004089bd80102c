"""Public (shared) email tables: inbox/address/sender configuration and thin indexes.

The user's email graph (threads, messages, attachments, delivery events) lives in the
Mailbox actor's per-user schema, never here.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from kody.fields import created_at, stable_user_id, text_id, updated_at

SYSTEM_EMAIL_OWNER = "system:email"


class EmailInbox(models.Model):
    id = text_id()
    user_id = stable_user_id()
    package_id = models.CharField(max_length=64, null=True, blank=True)
    name = models.CharField(max_length=255)
    description = models.TextField(blank=True, default="")
    enabled = models.BooleanField(default=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "email_inboxes"
        verbose_name_plural = "email inboxes"
        constraints = [
            models.UniqueConstraint(fields=["user_id", "name"], name="email_inboxes_user_name_uq"),
        ]

    def __str__(self) -> str:
        return self.name


class EmailInboxAddress(models.Model):
    id = text_id()
    # ON DELETE CASCADE lives in the database (migration 0002).
    inbox = models.ForeignKey(
        EmailInbox,
        on_delete=models.CASCADE,
        db_column="inbox_id",
        db_constraint=False,
        related_name="addresses",
    )
    user_id = stable_user_id(db_index=True)
    address = models.CharField(max_length=320, unique=True)
    local_part = models.CharField(max_length=64)
    domain = models.CharField(max_length=255)
    enabled = models.BooleanField(default=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "email_inbox_addresses"
        verbose_name_plural = "email inbox addresses"

    def __str__(self) -> str:
        return self.address


class SenderIdentityStatus(models.TextChoices):
    VERIFIED = "verified"


class EmailSenderIdentity(models.Model):
    id = text_id()
    user_id = stable_user_id()
    package_id = models.CharField(max_length=64, null=True, blank=True)
    email = models.CharField(max_length=320)
    domain = models.CharField(max_length=255)
    display_name = models.CharField(max_length=255, blank=True, default="")
    status = models.CharField(
        max_length=16, choices=SenderIdentityStatus.choices, default=SenderIdentityStatus.VERIFIED
    )
    verified_at = models.DateTimeField(null=True, blank=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "email_sender_identities"
        verbose_name_plural = "email sender identities"
        constraints = [
            models.UniqueConstraint(fields=["user_id", "email"], name="email_sender_identities_uq"),
            models.CheckConstraint(
                condition=Q(status__in=SenderIdentityStatus.values),
                name="email_sender_identities_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.email


class SenderRuleKind(models.TextChoices):
    ADDRESS = "address"
    DOMAIN = "domain"


class SenderRuleEffect(models.TextChoices):
    ALLOW = "allow"
    BLOCK = "block"
    QUARANTINE = "quarantine"


class EmailSenderRule(models.Model):
    id = text_id()
    user_id = stable_user_id()
    kind = models.CharField(max_length=16, choices=SenderRuleKind.choices)
    value = models.CharField(max_length=320)
    effect = models.CharField(max_length=16, choices=SenderRuleEffect.choices)
    note = models.TextField(blank=True, default="")
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "email_sender_rules"
        constraints = [
            models.UniqueConstraint(
                fields=["user_id", "kind", "value"],
                name="email_sender_rules_uq",
            ),
            models.CheckConstraint(
                condition=Q(kind__in=SenderRuleKind.values), name="email_sender_rules_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(effect__in=SenderRuleEffect.values),
                name="email_sender_rules_effect_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind}:{self.value}={self.effect}"


class EmailOutboundProviderIndex(models.Model):
    """Reverse lookup provider message id → owner/message for contextless delivery webhooks.

    The Mailbox actor's message row is authoritative; this is a thin derived index.
    Original PK(provider, provider_message_id); surrogate id + UNIQUE here (admin).
    """

    provider = models.CharField(max_length=64)
    provider_message_id = models.CharField(max_length=255)
    user_id = stable_user_id(db_index=True)
    # Opaque owner-scoped key; deliberately no FK into the per-user graph.
    message_id = models.CharField(max_length=64, unique=True)
    inbox_id = models.CharField(max_length=64)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "email_outbound_provider_index"
        verbose_name_plural = "email outbound provider index"
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "provider_message_id"],
                name="email_outbound_provider_index_pk_uq",
            ),
            # Operator mail never links provider ids into this global index.
            models.CheckConstraint(
                condition=~Q(user_id=SYSTEM_EMAIL_OWNER),
                name="email_outbound_provider_index_not_system",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.provider}:{self.provider_message_id}"


class EmailOutboundProviderIndexRepairOwner(models.Model):
    """Content-free summary of owners with pending provider-index repairs (health reporting)."""

    user_id = stable_user_id(primary_key=True)
    pending_count = models.PositiveIntegerField(default=0)
    oldest_pending_at = models.DateTimeField(null=True, blank=True)
    updated_at = updated_at()

    class Meta:
        db_table = "email_outbound_provider_index_repair_owners"
        indexes = [
            models.Index(fields=["oldest_pending_at"], name="email_idx_repair_oldest_ix"),
        ]

    def __str__(self) -> str:
        return self.user_id


class EmailInboundDueOwner(models.Model):
    """Bounded owner discovery for scheduled inbound reconciliation (due time, then owner)."""

    user_id = stable_user_id(primary_key=True)
    due_at = models.DateTimeField()
    reason = models.CharField(max_length=64, blank=True, default="")
    attempt_count = models.PositiveIntegerField(default=0)
    last_error = models.TextField(null=True, blank=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "email_inbound_due_owners"
        indexes = [
            models.Index(fields=["due_at", "user_id"], name="email_inbound_due_owners_ix"),
        ]

    def __str__(self) -> str:
        return self.user_id


class AlertEventType(models.TextChoices):
    BOUNCED = "bounced"
    COMPLAINED = "complained"


class EmailDeliveryAlertEvent(models.Model):
    """Short-lived bounced/complained signals for operator burst alerts (no user id)."""

    provider_event_id = models.CharField(primary_key=True, max_length=255)
    provider = models.CharField(max_length=64)
    event_type = models.CharField(max_length=16, choices=AlertEventType.choices)
    occurred_at = models.DateTimeField()
    owner_hash = models.CharField(max_length=128, blank=True, default="")
    created_at = created_at()

    class Meta:
        db_table = "email_delivery_alert_events"
        constraints = [
            models.CheckConstraint(
                condition=Q(event_type__in=AlertEventType.values),
                name="email_delivery_alert_events_type_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["occurred_at"], name="email_alert_occurred_ix"),
        ]

    def __str__(self) -> str:
        return f"{self.event_type}:{self.provider_event_id}"


class EmailUserGraphAuthority(models.Model):
    """Permanent singleton marker: user email writes fail closed without it.

    Keeps the graph-drop contract (owner count, frozen and dropped times).
    """

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    owner_count = models.PositiveIntegerField(default=0)
    frozen_at = models.DateTimeField(null=True, blank=True)
    dropped_at = models.DateTimeField(null=True, blank=True)
    created_at = created_at()

    class Meta:
        db_table = "email_user_graph_authority"
        verbose_name_plural = "email user graph authority"
        constraints = [
            models.CheckConstraint(condition=Q(id=1), name="email_user_graph_authority_singleton"),
        ]

    def __str__(self) -> str:
        return "email user graph authority"
