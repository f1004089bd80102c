"""``oauth_grants``: one row per person and OAuth client they let in (the connection a person
sees and revokes on /account/connections).

django-oauth-toolkit keeps the protocol rows (applications, authorization codes, access and
refresh tokens); this row is the person-facing side of it: which client, the scopes they
approved, whether they asked to be remembered (no consent page next time), and when the client
first and last used Kody. Revoking sets ``revoked_at`` and deletes the client's tokens for this
person; a later approval clears it again. ``client_id`` and ``client_name`` are copied so the
row still reads right after a CIMD client's document changes.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


def _no_scopes() -> list[str]:
    return []


class OAuthGrant(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oauth_grants"
    )
    application = models.ForeignKey(
        settings.OAUTH2_PROVIDER_APPLICATION_MODEL,
        on_delete=models.CASCADE,
        related_name="kody_grants",
    )
    client_id = models.CharField(max_length=255)
    client_name = models.CharField(max_length=255, blank=True, default="")
    scopes = models.JSONField(default=_no_scopes)
    remember = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    approved_at = models.DateTimeField(default=timezone.now)
    first_used_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "oauth_grants"
        constraints = [
            models.UniqueConstraint(fields=["user", "application"], name="oauth_grants_user_app_uq")
        ]
        indexes = [
            models.Index(
                fields=["user"],
                name="oauth_grants_used_ix",
                condition=Q(first_used_at__isnull=False),
            )
        ]

    def __str__(self) -> str:
        return f"{self.client_name or self.client_id} for user {self.user_id}"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
