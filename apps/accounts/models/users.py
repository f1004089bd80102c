"""The ``users`` table: login identity plus the stable id every user-owned surface keys on."""

from __future__ import annotations

import hashlib
import zoneinfo

from django.contrib.auth.models import AbstractBaseUser, PermissionsMixin, UserManager
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone


class Plan(models.TextChoices):
    FREE = "free"
    STANDARD = "standard"
    PRO = "pro"
    MAX = "max"


class ProfileVisibility(models.TextChoices):
    PUBLIC = "public"
    PRIVATE = "private"


class AccountType(models.TextChoices):
    PERSON = "person"
    PLATFORM = "platform"


class VerificationEmailStatus(models.TextChoices):
    """Outcome of the latest transactional verify-mail send for the account."""

    SENT = "sent"
    FAILED = "failed"
    DELIVERED = "delivered"
    DEFERRED = "deferred"
    BOUNCED = "bounced"
    COMPLAINED = "complained"


def normalize_email(email: str) -> str:
    return email.strip().lower()


def stable_user_id_for(email: str) -> str:
    """Lowercase SHA-256 hex of the normalized email, minted once at signup."""
    return hashlib.sha256(normalize_email(email).encode()).hexdigest()


class KodyUserManager(UserManager["User"]):
    def _create_user_object(self, username, email, password, **extra_fields):  # type: ignore[override]
        email = normalize_email(email or "")
        extra_fields.setdefault("stable_user_id", stable_user_id_for(email))
        return super()._create_user_object(username, email, password, **extra_fields)


def validate_time_zone(value: str) -> None:
    """Empty (UTC) or a zone this host's tz database knows."""
    if value and value not in zoneinfo.available_timezones():
        raise ValidationError("Unknown time zone.")


def _retention_days() -> list:
    return [MinValueValidator(1), MaxValueValidator(365)]


class User(AbstractBaseUser, PermissionsMixin):
    username = models.CharField(max_length=64, unique=True)
    email = models.EmailField(max_length=320, unique=True)
    password = models.CharField(max_length=256, db_column="password_hash")
    stable_user_id = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    email_verified_at = models.DateTimeField(null=True, blank=True)
    password_changed_at = models.DateTimeField(null=True, blank=True)

    plan = models.CharField(max_length=16, choices=Plan.choices, default=Plan.FREE)
    stripe_customer_id = models.CharField(max_length=255, null=True, blank=True)
    stripe_plan = models.CharField(max_length=16, choices=Plan.choices, null=True, blank=True)
    stripe_plan_refreshed_at = models.DateTimeField(null=True, blank=True)

    display_name = models.CharField(max_length=120, blank=True, default="")
    bio = models.TextField(blank=True, default="")
    profile_visibility = models.CharField(
        max_length=8, choices=ProfileVisibility.choices, default=ProfileVisibility.PUBLIC
    )
    avatar_key = models.CharField(max_length=512, null=True, blank=True)
    # An IANA zone name ("Europe/Paris") that pages show dates in; empty means UTC.
    time_zone = models.CharField(
        max_length=64, blank=True, default="", validators=[validate_time_zone]
    )
    account_type = models.CharField(
        max_length=16, choices=AccountType.choices, default=AccountType.PERSON
    )

    deleting_at = models.DateTimeField(null=True, blank=True)
    active_write_count = models.IntegerField(default=0)
    active_write_expires_at = models.DateTimeField(null=True, blank=True)
    suspended_at = models.DateTimeField(null=True, blank=True)
    email_outbound_paused_at = models.DateTimeField(null=True, blank=True)

    job_retention_success_once_days = models.IntegerField(
        null=True, blank=True, validators=_retention_days()
    )
    job_retention_failed_once_days = models.IntegerField(
        null=True, blank=True, validators=_retention_days()
    )
    job_retention_disabled_recurring_days = models.IntegerField(
        null=True, blank=True, validators=_retention_days()
    )

    # First-touch marketing attribution, written once at signup when present.
    utm_source = models.CharField(max_length=255, null=True, blank=True)
    utm_medium = models.CharField(max_length=255, null=True, blank=True)
    utm_campaign = models.CharField(max_length=255, null=True, blank=True)
    utm_term = models.CharField(max_length=255, null=True, blank=True)
    utm_content = models.CharField(max_length=255, null=True, blank=True)
    first_touch_landing_path = models.CharField(max_length=2048, null=True, blank=True)
    first_touch_referrer = models.CharField(max_length=2048, null=True, blank=True)

    # Activation and return stamps for product metrics (each written once, except
    # last_active_at, which is a UTC-day stamp).
    first_mcp_connected_at = models.DateTimeField(null=True, blank=True)
    first_execute_at = models.DateTimeField(null=True, blank=True)
    first_search_at = models.DateTimeField(null=True, blank=True)
    first_saved_package_at = models.DateTimeField(null=True, blank=True)
    first_secret_at = models.DateTimeField(null=True, blank=True)
    first_integration_at = models.DateTimeField(null=True, blank=True)
    first_job_at = models.DateTimeField(null=True, blank=True)
    mcp_client_name = models.CharField(max_length=255, null=True, blank=True)
    last_active_at = models.DateTimeField(null=True, blank=True)

    # Latest verify-mail delivery outcome (support can see why a user never verified).
    verification_email_status = models.CharField(
        max_length=16, choices=VerificationEmailStatus.choices, null=True, blank=True
    )
    verification_email_status_at = models.DateTimeField(null=True, blank=True)
    verification_email_error = models.TextField(null=True, blank=True)

    # Standard-plan overlays: the write-once second-agent gift and stackable referral credit.
    second_agent_standard_gift_granted_at = models.DateTimeField(null=True, blank=True)
    second_agent_standard_gift_expires_at = models.DateTimeField(null=True, blank=True)
    referral_standard_credit_expires_at = models.DateTimeField(null=True, blank=True)
    experiments_opt_in = models.BooleanField(default=False)

    is_active = models.BooleanField(default=True)
    is_staff = models.BooleanField(default=False)

    objects = KodyUserManager()

    USERNAME_FIELD = "username"
    EMAIL_FIELD = "email"
    REQUIRED_FIELDS = ["email"]

    class Meta:
        db_table = "users"
        indexes = [
            models.Index(
                fields=["deleting_at"],
                condition=Q(deleting_at__isnull=False),
                name="users_deleting_at_ix",
            ),
            # The unverified-account purge scans never-verified rows oldest first.
            models.Index(
                fields=["created_at"],
                condition=Q(email_verified_at__isnull=True),
                name="users_unverified_created_ix",
            ),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(plan__in=Plan.values), name="users_plan_valid"),
            models.CheckConstraint(
                condition=Q(stripe_plan__isnull=True) | Q(stripe_plan__in=Plan.values),
                name="users_stripe_plan_valid",
            ),
            models.CheckConstraint(
                condition=Q(profile_visibility__in=ProfileVisibility.values),
                name="users_profile_visibility_valid",
            ),
            models.CheckConstraint(
                condition=Q(account_type__in=AccountType.values), name="users_account_type_valid"
            ),
            models.CheckConstraint(
                condition=Q(verification_email_status__isnull=True)
                | Q(verification_email_status__in=VerificationEmailStatus.values),
                name="users_verification_email_status_valid",
            ),
            models.UniqueConstraint(
                fields=["stripe_customer_id"],
                condition=Q(stripe_customer_id__isnull=False),
                name="users_stripe_customer_id_uq",
            ),
            *[
                models.CheckConstraint(
                    condition=Q(**{f"{col}__isnull": True})
                    | Q(**{f"{col}__gte": 1, f"{col}__lte": 365}),
                    name=f"users_{col}_range",
                )
                for col in (
                    "job_retention_success_once_days",
                    "job_retention_failed_once_days",
                    "job_retention_disabled_recurring_days",
                )
            ],
        ]

    def __str__(self) -> str:
        return self.username
