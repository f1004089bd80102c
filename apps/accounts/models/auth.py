"""Second factors, social logins and signup invites."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from apps.accounts.models.users import Plan

# Foreign keys use db_constraint=False: migration 0002 declares them in the database with the
# original ON DELETE action, so raw deletes (account deletion's batch) behave like ORM ones.


class Verification(models.Model):
    """TOTP / one-time code secrets; ``target`` holds ``str(users.id)``."""

    type = models.CharField(max_length=64)
    target = models.CharField(max_length=320)
    secret = models.CharField(max_length=255)
    algorithm = models.CharField(max_length=32)
    digits = models.PositiveSmallIntegerField()
    period = models.PositiveIntegerField()
    char_set = models.CharField(max_length=255)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "verifications"
        constraints = [
            models.UniqueConstraint(fields=["target", "type"], name="verifications_target_type"),
        ]

    def __str__(self) -> str:
        return f"{self.type} for {self.target}"


class Passkey(models.Model):
    # The WebAuthn credential id chosen by the authenticator, not one we mint.
    id = models.CharField(max_length=1024, primary_key=True)
    aaguid = models.CharField(max_length=64)
    public_key = models.TextField()
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        db_column="user_id",
        db_constraint=False,
        related_name="passkeys",
    )
    webauthn_user_handle = models.CharField(max_length=255)
    counter = models.BigIntegerField(default=0)
    device_type = models.CharField(max_length=32)
    backed_up = models.BooleanField(default=False)
    transports = models.CharField(max_length=255, null=True, blank=True)
    name = models.CharField(max_length=255, blank=True, default="")
    last_used_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "passkeys"

    def __str__(self) -> str:
        return self.name or self.id[:16]


class OAuthConnection(models.Model):
    """A social login linked to an account (GitHub, Google, ...)."""

    provider_name = models.CharField(max_length=64)
    provider_id = models.CharField(max_length=255)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        db_column="user_id",
        db_constraint=False,
        related_name="oauth_connections",
    )
    provider_display_name = models.CharField(max_length=255, null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "oauth_connections"
        constraints = [
            models.UniqueConstraint(
                fields=["provider_name", "provider_id"], name="oauth_connections_provider"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.provider_name}:{self.provider_id}"


class Invite(models.Model):
    code = models.CharField(max_length=64, primary_key=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        db_column="created_by",
        db_constraint=False,
        related_name="+",
    )
    note = models.TextField(blank=True, default="")
    max_uses = models.IntegerField(default=1)
    use_count = models.IntegerField(default=0)
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    plan = models.CharField(max_length=16, choices=Plan.choices, default=Plan.FREE)

    class Meta:
        db_table = "invites"
        constraints = [
            models.CheckConstraint(condition=Q(max_uses__gt=0), name="invites_max_uses_positive"),
            models.CheckConstraint(
                condition=Q(use_count__gte=0), name="invites_use_count_nonnegative"
            ),
            models.CheckConstraint(condition=Q(plan__in=Plan.values), name="invites_plan_valid"),
        ]

    def __str__(self) -> str:
        return self.code
