"""Who may use a package: invocation tokens, scope and share grants, webhook endpoints."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from kody.fields import (
    created_at,
    json_list,
    stable_user_id,
    text_id,
    updated_at,
)


class PackageInvocationToken(models.Model):
    id = text_id()
    user_id = stable_user_id(db_index=True)
    package_id = models.CharField(max_length=64)
    name = models.CharField(max_length=255)
    token_hash = models.CharField(max_length=128, unique=True)
    email = models.EmailField(max_length=320, null=True, blank=True)
    display_name = models.CharField(max_length=255, blank=True, default="")
    package_ids_json = json_list()
    package_kody_ids_json = json_list()
    export_names_json = json_list()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "package_invocation_tokens"

    def __str__(self) -> str:
        return self.name


class PackageScopeGrant(models.Model):
    """Original PK(scope_owner_user_id, grantee_user_id); surrogate id + UNIQUE here (admin)."""

    scope_owner_user_id = stable_user_id()
    grantee_user_id = stable_user_id(db_index=True)
    created_by_user_id = stable_user_id()
    created_at = created_at()

    class Meta:
        db_table = "package_scope_grants"
        constraints = [
            models.UniqueConstraint(
                fields=["scope_owner_user_id", "grantee_user_id"], name="package_scope_grants_pk_uq"
            ),
            models.CheckConstraint(
                condition=~Q(scope_owner_user_id=F("grantee_user_id")),
                name="package_scope_grants_not_self",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scope_owner_user_id[:12]}→{self.grantee_user_id[:12]}"


class ShareStatus(models.TextChoices):
    PENDING = "pending"
    ACCEPTED = "accepted"
    DECLINED = "declined"
    REVOKED = "revoked"


class PackageShareGrant(models.Model):
    """A person-to-person invitation to use one saved package (role ``use``)."""

    id = text_id()
    package_id = models.CharField(max_length=64)
    owner_user_id = stable_user_id()
    invitee_email = models.EmailField(max_length=320, null=True, blank=True)
    invitee_username = models.CharField(max_length=64, null=True, blank=True)
    grantee_user_id = stable_user_id(null=True, blank=True)
    status = models.CharField(
        max_length=16,
        choices=ShareStatus.choices,
        default=ShareStatus.PENDING,
    )
    role = models.CharField(max_length=16, default="use")
    trust_level = models.CharField(max_length=32, blank=True, default="")
    accepted_published_commit = models.CharField(max_length=64, null=True, blank=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "package_share_grants"
        indexes = [
            models.Index(fields=["owner_user_id", "package_id"], name="pkg_share_owner_pkg_ix"),
            models.Index(fields=["grantee_user_id", "status"], name="pkg_share_grantee_ix"),
        ]

    def __str__(self) -> str:
        return f"{self.package_id}:{self.status}"


class WebhookEndpoint(models.Model):
    """Minted ingress URL state. The URL secret is stored hashed (ingress) and encrypted
    (server-side apply); neither leaves the database."""

    id = text_id()
    user_id = stable_user_id()
    package_id = models.CharField(max_length=64)
    webhook_name = models.CharField(max_length=255)
    url_secret_hash = models.CharField(max_length=128, null=True, blank=True)
    url_secret_encrypted = models.TextField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    rotated_at = models.DateTimeField(null=True, blank=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "webhook_endpoints"
        constraints = [
            models.UniqueConstraint(
                fields=["user_id", "package_id", "webhook_name"], name="webhook_endpoints_uq"
            ),
        ]

    def __str__(self) -> str:
        return self.webhook_name
