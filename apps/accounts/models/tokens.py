"""``access_tokens``: every bearer credential an agent can present, hashed at rest.

Personal access tokens (``kind='pat'``) are issued on /account/connections. OAuth 2.1 access
tokens (``kind='oauth'``, ``client_id`` naming the client, ``scopes`` the capability domains the
person approved, ``audience`` the resource it was issued for) get a row here beside
django-oauth-toolkit's own, in the same transaction, so the bearer check, scopes, metering and
the write guard are one path for both kinds (docs/adr/0004, docs/adr/0052). The row goes when
the toolkit's token goes (``oauth_token`` cascades): revoked, rotated or purged.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

FULL_ACCESS = "*"


class TokenKind(models.TextChoices):
    PAT = "pat"
    OAUTH = "oauth"


def _full_access() -> list[str]:
    return [FULL_ACCESS]


class AccessToken(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="access_tokens"
    )
    kind = models.CharField(max_length=16, choices=TokenKind.choices, default=TokenKind.PAT)
    name = models.CharField(max_length=100)
    # The first characters of the secret, shown in lists so a person can tell tokens apart.
    token_prefix = models.CharField(max_length=24)
    token_hash = models.CharField(max_length=64, unique=True)
    # NULL, not '', marks "no client": the kind/client check constraint relies on it.
    client_id = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    scopes = models.JSONField(default=_full_access)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    oauth_token = models.OneToOneField(
        settings.OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="kody_token",
    )
    # The resources (RFC 8707) an OAuth token may be presented to; NULL for a PAT (any surface).
    audience = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "access_tokens"
        indexes = [models.Index(fields=["user", "created_at"], name="access_tokens_user_ix")]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=TokenKind.values), name="access_tokens_kind_valid"
            ),
            # A PAT belongs to no OAuth client; an OAuth token always names one.
            models.CheckConstraint(
                condition=Q(kind=TokenKind.PAT, client_id__isnull=True)
                | Q(kind=TokenKind.OAUTH, client_id__isnull=False),
                name="access_tokens_client_matches_kind",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.token_prefix}…)"

    @property
    def is_active(self) -> bool:
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or self.expires_at > timezone.now()

    @property
    def principal_id(self) -> str:
        """Who is calling, for audit rows and MCP session ownership: the client, else the PAT."""
        return self.client_id or f"pat:{self.pk}"

    def allows(self, scope: str) -> bool:
        return FULL_ACCESS in self.scopes or scope in self.scopes
