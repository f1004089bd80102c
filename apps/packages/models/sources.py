"""Entity sources (Artifacts repo pointers), plain repos, saved packages and their artifacts."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce

from kody.fields import (
    created_at,
    json_list,
    stable_user_id,
    text_id,
    updated_at,
)


class EntityKind(models.TextChoices):
    JOB = "job"
    PACKAGE = "package"
    REPO = "repo"


class EntitySource(models.Model):
    id = text_id()
    user_id = stable_user_id()
    entity_kind = models.CharField(max_length=16, choices=EntityKind.choices)
    entity_id = models.CharField(max_length=255)
    repo_id = models.CharField(max_length=255, unique=True)
    published_commit = models.CharField(max_length=64, null=True, blank=True)
    indexed_commit = models.CharField(max_length=64, null=True, blank=True)
    manifest_path = models.CharField(max_length=512, default="package.json")
    source_root = models.CharField(max_length=512, blank=True, default="")
    last_external_check_at = models.DateTimeField(null=True, blank=True)
    external_check_until = models.DateTimeField(null=True, blank=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "entity_sources"
        constraints = [
            models.CheckConstraint(
                condition=Q(entity_kind__in=EntityKind.values), name="entity_sources_kind_valid"
            ),
            models.UniqueConstraint(
                fields=["user_id", "entity_kind", "entity_id"], name="entity_sources_entity_uq"
            ),
        ]
        indexes = [
            # The artifact-push reconcile lane reads only packages still awaiting a check.
            models.Index(
                fields=["external_check_until", "last_external_check_at"],
                condition=Q(entity_kind="package", external_check_until__isnull=False),
                name="entity_sources_ext_check_ix",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.entity_kind}:{self.entity_id}"


class EntitySourceArtifactsPushSubscription(models.Model):
    source_id = models.CharField(primary_key=True, max_length=64)
    user_id = stable_user_id(db_index=True)
    repo_id = models.CharField(max_length=255, unique=True)
    subscription_id = models.CharField(max_length=255)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "entity_source_artifacts_push_subscriptions"

    def __str__(self) -> str:
        return self.source_id


class UserRepo(models.Model):
    # Same value as entity_sources.entity_id for entity_kind = 'repo'.
    id = text_id()
    user_id = stable_user_id()
    name = models.CharField(max_length=255)
    description = models.TextField(blank=True, default="")
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "user_repos"
        constraints = [
            models.UniqueConstraint(fields=["user_id", "name"], name="user_repos_user_name_uq"),
        ]

    def __str__(self) -> str:
        return self.name


class SavedPackage(models.Model):
    id = text_id()
    user_id = stable_user_id()
    name = models.CharField(max_length=255)
    kody_id = models.CharField(max_length=255)
    description = models.TextField(blank=True, default="")
    tags_json = json_list()
    search_text = models.TextField(blank=True, default="")
    source_id = models.CharField(max_length=64, unique=True)
    has_app = models.BooleanField(default=False)
    hidden = models.BooleanField(default=False)
    is_private = models.BooleanField(default=True)
    # Set: agents and reconcile may not promote published_commit until the owner approves.
    locked_at = models.DateTimeField(null=True, blank=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "saved_packages"
        constraints = [
            models.UniqueConstraint(
                fields=["user_id", "kody_id"],
                name="saved_packages_kody_id_uq",
            ),
            models.UniqueConstraint(fields=["user_id", "name"], name="saved_packages_name_uq"),
        ]

    def __str__(self) -> str:
        return self.kody_id


class SavedPackageSearchIndexDebt(models.Model):
    package_id = models.CharField(primary_key=True, max_length=64)
    user_id = stable_user_id(db_index=True)
    generation = models.IntegerField(default=0)
    embed_text = models.TextField(blank=True, default="")
    last_error = models.TextField(null=True, blank=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "saved_package_search_index_debt"
        verbose_name_plural = "saved package search index debt"

    def __str__(self) -> str:
        return self.package_id


class PackageKodyIdRedirect(models.Model):
    """Original PK(user_id, old_kody_id); surrogate id + UNIQUE here (admin)."""

    user_id = stable_user_id()
    old_kody_id = models.CharField(max_length=255)
    package_id = models.CharField(max_length=64, db_index=True)
    created_at = created_at()

    class Meta:
        db_table = "package_kody_id_redirects"
        constraints = [
            models.UniqueConstraint(
                fields=["user_id", "old_kody_id"], name="package_kody_id_redirects_pk_uq"
            ),
        ]

    def __str__(self) -> str:
        return self.old_kody_id


class PublishedBundleArtifact(models.Model):
    id = text_id()
    user_id = stable_user_id()
    source_id = models.CharField(max_length=64)
    published_commit = models.CharField(max_length=64)
    artifact_kind = models.CharField(max_length=64)
    artifact_name = models.CharField(max_length=255, null=True, blank=True)
    entry_point = models.CharField(max_length=512)
    kv_key = models.CharField(max_length=1024)
    dependencies_json = json_list()
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "published_bundle_artifacts"
        constraints = [
            # A missing artifact_name counts as '' so two unnamed artifacts still collide.
            models.UniqueConstraint(
                F("user_id"),
                F("source_id"),
                F("artifact_kind"),
                Coalesce(F("artifact_name"), Value("")),
                F("entry_point"),
                name="published_bundle_artifacts_uq",
            ),
        ]
        indexes = [
            models.Index(
                fields=["source_id", "published_commit"],
                name="pub_bundle_source_commit_ix",
            ),
            # The 30-day retention prune walks rows across users by age.
            models.Index(fields=["created_at"], name="pub_bundle_created_ix"),
        ]

    def __str__(self) -> str:
        return f"{self.artifact_kind}:{self.entry_point}"
