"""Value and secret buckets, their entries, and secret-provider bindings/grants."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from kody.fields import (
    created_at,
    json_list,
    stable_user_id,
    text_id,
    updated_at,
)


class ValueScope(models.TextChoices):
    SESSION = "session"
    APP = "app"
    USER = "user"


class ValueBucket(models.Model):
    id = text_id()
    user_id = stable_user_id()
    scope = models.CharField(max_length=16, choices=ValueScope.choices)
    binding_key = models.CharField(max_length=255, blank=True, default="")
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "value_buckets"
        constraints = [
            models.CheckConstraint(
                condition=Q(scope__in=ValueScope.values),
                name="value_buckets_scope_valid",
            ),
            models.UniqueConstraint(
                fields=["user_id", "scope", "binding_key"], name="value_buckets_user_scope_key_uq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scope}:{self.binding_key}"


class ValueEntry(models.Model):
    """Original PK(bucket_id, name); surrogate id + UNIQUE here (admin)."""

    bucket = models.ForeignKey(
        ValueBucket, on_delete=models.CASCADE, db_column="bucket_id", db_constraint=False
    )
    name = models.CharField(max_length=255)
    description = models.TextField(blank=True, default="")
    value = models.TextField(blank=True, default="")
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "value_entries"
        verbose_name_plural = "value entries"
        constraints = [
            models.UniqueConstraint(fields=["bucket", "name"], name="value_entries_pk_uq"),
        ]

    def __str__(self) -> str:
        return self.name


class SecretScope(models.TextChoices):
    SESSION = "session"
    PACKAGE = "package"
    USER = "user"


class SecretBucket(models.Model):
    id = text_id()
    user_id = stable_user_id()
    scope = models.CharField(max_length=16, choices=SecretScope.choices)
    # For package buckets this is the saved_packages.id that owns the secrets.
    binding_key = models.CharField(max_length=255, blank=True, default="")
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "secret_buckets"
        constraints = [
            models.CheckConstraint(
                condition=Q(scope__in=SecretScope.values),
                name="secret_buckets_scope_valid",
            ),
            models.UniqueConstraint(
                fields=["user_id", "scope", "binding_key"], name="secret_buckets_user_scope_key_uq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scope}:{self.binding_key}"


class SecretEntry(models.Model):
    """Original PK(bucket_id, name); surrogate id + UNIQUE here (admin).

    ``encrypted_value`` and ``lookup_hash`` are credential-equivalent: never exported, never
    shown in admin.
    """

    bucket = models.ForeignKey(
        SecretBucket, on_delete=models.CASCADE, db_column="bucket_id", db_constraint=False
    )
    name = models.CharField(max_length=255)
    description = models.TextField(blank=True, default="")
    encrypted_value = models.TextField()
    # Which keyring key sealed encrypted_value (AES-GCM); rotate_secret_key re-seals old ones.
    key_id = models.CharField(max_length=32, default="")
    lookup_hash = models.CharField(max_length=128, null=True, blank=True, db_index=True)
    allowed_hosts = json_list()
    allowed_packages = json_list()
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "secret_entries"
        verbose_name_plural = "secret entries"
        constraints = [
            models.UniqueConstraint(fields=["bucket", "name"], name="secret_entries_pk_uq"),
        ]

    def __str__(self) -> str:
        return self.name


class SecretProviderBinding(models.Model):
    """Pins one saved package plus its door-key secret name to a provider id, per account."""

    id = text_id()
    user_id = stable_user_id()
    provider_id = models.CharField(max_length=255)
    package_id = models.CharField(max_length=64)
    secret_name = models.CharField(max_length=255)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "secret_provider_bindings"
        constraints = [
            models.UniqueConstraint(
                fields=["user_id", "provider_id"], name="secret_provider_bindings_user_provider_uq"
            ),
        ]

    def __str__(self) -> str:
        return self.provider_id


class SecretProviderGrant(models.Model):
    """Lets one saved package use a canonical (provider, ref); dropped with its binding."""

    id = text_id()
    # ON DELETE CASCADE lives in the database (migration 0002): unbind/rebind drops grants.
    binding = models.ForeignKey(
        SecretProviderBinding,
        on_delete=models.CASCADE,
        db_column="binding_id",
        db_constraint=False,
        related_name="grants",
    )
    user_id = stable_user_id()
    package_id = models.CharField(max_length=64)
    ref = models.CharField(max_length=512)
    created_at = created_at()

    class Meta:
        db_table = "secret_provider_grants"
        constraints = [
            models.UniqueConstraint(
                fields=["binding", "package_id", "ref"], name="secret_provider_grants_uq"
            ),
        ]
        indexes = [
            models.Index(fields=["user_id", "package_id"], name="secret_prov_grants_user_ix"),
        ]

    def __str__(self) -> str:
        return f"{self.package_id}:{self.ref}"
