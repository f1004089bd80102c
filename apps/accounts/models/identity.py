"""Email identity: emails are claims on an account, plus the hashed one-time token tables.

``users.stable_user_id`` is minted once at signup and never reminted. Changing the login email
keeps the previous verified address claimed, so it cannot open a second account until its owner
re-verifies and releases it; only then may a new signup take it (with a fresh stable id).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from kody.fields import stable_user_id

# Foreign keys use db_constraint=False: migration 0002 declares them in the database with the
# original ON DELETE action, so raw deletes (account deletion's batch) behave like ORM ones.


class EmailClaimStatus(models.TextChoices):
    CLAIMED = "claimed"
    RELEASED = "released"


class UserEmailClaim(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        db_column="user_id",
        db_constraint=False,
        related_name="email_claims",
    )
    email = models.EmailField(max_length=320)
    status = models.CharField(max_length=16, choices=EmailClaimStatus.choices)
    claimed_at = models.DateTimeField(default=timezone.now)
    released_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "user_email_claims"
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=EmailClaimStatus.values), name="user_email_claims_status"
            ),
            models.UniqueConstraint(fields=["user", "email"], name="user_email_claims_user_email"),
            # One live claim per address across every account.
            models.UniqueConstraint(
                fields=["email"],
                condition=Q(status=EmailClaimStatus.CLAIMED),
                name="user_email_claims_active_email",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.email} ({self.status})"


class HashedTokenBase(models.Model):
    """One-time link tokens: only the SHA-256 of the token is stored."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        db_column="user_id",
        db_constraint=False,
        related_name="+",
    )
    token_hash = models.CharField(max_length=128, unique=True)
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{type(self).__name__} for user {self.user_id}"


class PasswordReset(HashedTokenBase):
    class Meta:
        db_table = "password_resets"


class EmailVerification(HashedTokenBase):
    class Meta:
        db_table = "email_verifications"


class PendingEmailChange(HashedTokenBase):
    new_email = models.EmailField(max_length=320, unique=True)

    class Meta:
        db_table = "pending_email_changes"


class PendingEmailClaimRelease(HashedTokenBase):
    """The owner's confirmation link that releases a former address they still hold."""

    email = models.EmailField(max_length=320)

    class Meta:
        db_table = "pending_email_claim_releases"
        constraints = [
            models.UniqueConstraint(
                fields=["user", "email"], name="pending_email_claim_rel_user_email"
            ),
        ]


class UsernameRedirect(models.Model):
    """A renamed account's old username keeps resolving to its stable id."""

    old_username = models.CharField(max_length=64, primary_key=True)
    user_id = stable_user_id(db_index=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "username_redirects"

    def __str__(self) -> str:
        return self.old_username
