"""Lifecycle mail (usage-state campaigns, tips opt-out) and the referral reward ledger."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from kody.fields import stable_user_id

ADVOCATE_TEMPLATE = "advocate_referral_testimonial"


class CampaignState(models.TextChoices):
    VERIFIED_NO_MCP = "VerifiedNoMcp"
    CONNECTED_NO_PACKAGE = "ConnectedNoPackage"
    PACKAGED_SINGLE_CLIENT = "PackagedSingleClient"
    ACTIVATED = "Activated"
    COOLING = "Cooling"
    LIMIT_AWARE = "LimitAware"
    PAID = "Paid"


class CampaignOrigin(models.TextChoices):
    SEED = "seed"  # observed by the sweep without mailing
    EVENT = "event"


class UserUsageCampaign(models.Model):
    """One usage-state row per user; ever_activated and cooling_terminal never go back."""

    user_id = stable_user_id(primary_key=True)
    state = models.CharField(max_length=32, choices=CampaignState.choices)
    entered_at = models.DateTimeField()
    send_count = models.IntegerField(default=0)
    last_sent_at = models.DateTimeField(null=True, blank=True)
    last_evaluated_at = models.DateTimeField()
    origin = models.CharField(max_length=8, choices=CampaignOrigin.choices)
    cooling_terminal = models.BooleanField(default=False)
    ever_activated = models.BooleanField(default=False)
    first_activated_at = models.DateTimeField(null=True, blank=True)
    advocate_sent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "user_usage_campaigns"
        indexes = [
            models.Index(
                fields=["last_evaluated_at", "user_id"], name="user_usage_campaigns_eval_ix"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(origin__in=CampaignOrigin.values), name="user_usage_campaigns_origin"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user_id[:12]} {self.state}"


class UserUsageCampaignSend(models.Model):
    """Idempotent send ledger: inserting the same (user, state, index) twice is refused."""

    user_id = stable_user_id(db_index=True)
    state = models.CharField(max_length=32, choices=CampaignState.choices)
    template = models.CharField(max_length=64)
    send_index = models.IntegerField()
    sent_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "user_usage_campaign_sends"
        constraints = [
            models.UniqueConstraint(
                fields=["user_id", "state", "send_index"], name="user_usage_campaign_send_key"
            ),
            # The advocate / testimonial mail goes out at most once per user, ever.
            models.UniqueConstraint(
                fields=["user_id"],
                condition=Q(template=ADVOCATE_TEMPLATE),
                name="user_usage_campaign_advocate_once",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.template} #{self.send_index}"


class UserTipsEmailOptOut(models.Model):
    user_id = stable_user_id(primary_key=True)
    opted_out_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "user_tips_email_opt_outs"

    def __str__(self) -> str:
        return self.user_id


class ReferralStatus(models.TextChoices):
    PENDING = "pending"
    REWARDED = "rewarded"
    REJECTED = "rejected"


class Referral(models.Model):
    """Signup-time attribution plus the invoice-gated reward (held while email is unverified)."""

    referrer_stable_user_id = stable_user_id(db_index=True)
    referee_stable_user_id = stable_user_id(unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    status = models.CharField(
        max_length=16, choices=ReferralStatus.choices, default=ReferralStatus.PENDING
    )
    rewarded_at = models.DateTimeField(null=True, blank=True)
    reward_invoice_id = models.CharField(max_length=255, null=True, blank=True)
    reject_reason = models.TextField(null=True, blank=True)
    held_invoice_id = models.CharField(max_length=255, null=True, blank=True)
    held_period_end_at = models.DateTimeField(null=True, blank=True)
    credits_granted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "referrals"
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=ReferralStatus.values), name="referrals_status"
            ),
            # One Stripe invoice rewards at most one referral.
            models.UniqueConstraint(
                fields=["reward_invoice_id"],
                condition=Q(reward_invoice_id__isnull=False),
                name="referrals_reward_invoice",
            ),
        ]

    def __str__(self) -> str:
        return f"referral {self.pk} ({self.status})"
