"""Git refs and repo tokens of the source store.

Objects and packs live in the ``source_repos`` blob storage; the refs that name commits live
here, so a publish moves a ref and ``entity_sources.published_commit`` in one transaction.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from kody.fields import created_at, stable_user_id, text_id, updated_at


class SourceRepoRef(models.Model):
    """One ref (``refs/heads/main``, a tag, ...) of one repo: its name and the object it names."""

    repo_id = models.CharField(max_length=255)
    name = models.CharField(max_length=512)
    target = models.CharField(max_length=64)
    updated_at = updated_at()

    class Meta:
        db_table = "source_repo_refs"
        constraints = [
            models.UniqueConstraint(fields=["repo_id", "name"], name="source_repo_refs_uq"),
        ]

    def __str__(self) -> str:
        return f"{self.repo_id}:{self.name}"


class RepoTokenAccess(models.TextChoices):
    READ = "read"
    WRITE = "write"


class RepoToken(models.Model):
    """A short-lived credential for one repo's git remote; only its SHA-256 is stored."""

    id = text_id()
    user_id = stable_user_id()
    source_id = models.CharField(max_length=64)
    access = models.CharField(max_length=8, choices=RepoTokenAccess.choices)
    token_hash = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_at = created_at()

    class Meta:
        db_table = "repo_tokens"
        constraints = [
            models.CheckConstraint(
                condition=Q(access__in=RepoTokenAccess.values), name="repo_tokens_access_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["user_id", "source_id"], name="repo_tokens_owner_ix"),
            models.Index(fields=["expires_at"], name="repo_tokens_expires_ix"),
        ]

    def __str__(self) -> str:
        return f"{self.access}:{self.source_id}"
