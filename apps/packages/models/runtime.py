"""Runtime indexes: service states, conversation uses, storage buckets, repo-session hints,
vector fingerprints. Most are thin indexes of state that is authoritative elsewhere."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from kody.fields import created_at, stable_user_id, updated_at


class ServiceStatus(models.TextChoices):
    RUNNING = "running"
    IDLE = "idle"
    STOPPED = "stopped"
    ERROR = "error"


class PackageServiceState(models.Model):
    """Enumeration index only; the running count is authoritative in the UserMeter actor.

    Original PK(user_id, package_id, service_name); surrogate id + UNIQUE here (admin).
    """

    user_id = stable_user_id()
    package_id = models.CharField(max_length=64)
    service_name = models.CharField(max_length=255)
    status = models.CharField(max_length=16, choices=ServiceStatus.choices)
    started_at = models.DateTimeField(null=True, blank=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "package_service_states"
        constraints = [
            models.UniqueConstraint(
                fields=["user_id", "package_id", "service_name"],
                name="package_service_states_pk_uq",
            ),
            models.CheckConstraint(
                condition=Q(status__in=ServiceStatus.values),
                name="package_service_states_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.package_id}:{self.service_name}"


class AgentPackageConversationUse(models.Model):
    """Original PK(user_id, package_id, conversation_id); surrogate id + UNIQUE here (admin)."""

    user_id = stable_user_id()
    package_id = models.CharField(max_length=64)
    conversation_id = models.CharField(max_length=255)
    first_used_at = models.DateTimeField()
    last_used_at = models.DateTimeField()

    class Meta:
        db_table = "agent_package_conversation_uses"
        constraints = [
            models.UniqueConstraint(
                fields=["user_id", "package_id", "conversation_id"],
                name="agent_pkg_conv_uses_pk_uq",
            ),
        ]
        indexes = [
            models.Index(fields=["user_id", "last_used_at"], name="agent_pkg_uses_user_last_ix"),
            # The 180-day prune orders by last_used_at across users, then the row id.
            models.Index(fields=["last_used_at", "id"], name="agent_pkg_uses_last_used_ix"),
        ]

    def __str__(self) -> str:
        return f"{self.package_id}:{self.conversation_id}"


class StorageBucketKind(models.TextChoices):
    JOB = "job"
    PACKAGE = "package"
    SERVICE = "service"
    EXECUTE = "execute"
    REPO_SESSION = "repo_session"
    # A package's or repo's published source tree (kept in the blob store, not in rows).
    SOURCE = "source"
    UNKNOWN = "unknown"


class UserStorageBucket(models.Model):
    """Inventory of storage buckets and repo-session workspaces for the storage estimate.

    Original PK(user_id, storage_id); surrogate id + UNIQUE here (admin).
    """

    user_id = stable_user_id()
    storage_id = models.CharField(max_length=512)
    kind = models.CharField(max_length=16, choices=StorageBucketKind.choices)
    last_seen_at = models.DateTimeField()
    estimated_bytes = models.BigIntegerField(null=True, blank=True)
    estimated_bytes_updated_at = models.DateTimeField(null=True, blank=True)
    created_at = created_at()

    class Meta:
        db_table = "user_storage_buckets"
        constraints = [
            models.UniqueConstraint(
                fields=["user_id", "storage_id"],
                name="user_storage_buckets_pk_uq",
            ),
            models.CheckConstraint(
                condition=Q(kind__in=StorageBucketKind.values),
                name="user_storage_buckets_kind_valid",
            ),
        ]
        indexes = [
            # The estimate backfill lane picks the stalest estimates first.
            models.Index(fields=["estimated_bytes_updated_at"], name="user_storage_est_updated_ix"),
        ]

    def __str__(self) -> str:
        return self.storage_id


class RepoSessionDueOwner(models.Model):
    """Thin hint: one row per user with any repo session (the catalog lives in the actor)."""

    user_id = stable_user_id(primary_key=True)
    due_at = models.DateTimeField()
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "repo_session_due_owners"
        indexes = [
            models.Index(fields=["due_at", "user_id"], name="repo_session_due_owners_ix"),
        ]

    def __str__(self) -> str:
        return self.user_id


class RepoSessionStorageBucketCursor(models.Model):
    """Platform-owned singleton keyset cursor for the repo-session storage sweep."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    position = models.CharField(max_length=512, null=True, blank=True)
    updated_at = updated_at()

    class Meta:
        db_table = "repo_session_storage_bucket_cursor"
        constraints = [
            models.CheckConstraint(condition=Q(id=1), name="repo_session_storage_cursor_singleton"),
        ]

    def __str__(self) -> str:
        return self.position or "(start)"


class VectorEmbedFingerprint(models.Model):
    """Derived skip cache for vector upserts. ``user_id`` is the vector namespace: the stable
    user id, or ``__kody_builtin__`` for builtin capabilities."""

    user_id = stable_user_id()
    vector_id = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "vector_embed_fingerprints"
        constraints = [
            models.UniqueConstraint(fields=["user_id", "vector_id"], name="vector_embed_fp_uq"),
        ]
        indexes = [
            models.Index(fields=["vector_id"], name="vector_embed_fp_vector_ix"),
        ]

    def __str__(self) -> str:
        return self.vector_id


class SearchIndexDebt(models.Model):
    """A source row whose vector is not yet in step with it: embedding was deferred (a slow
    model) or failed. The drain re-reads the row, writes (or removes) its vector and deletes
    the debt; a failure backs off and is retried. Holds ids only, never text."""

    kind = models.CharField(max_length=16)  # memory | job | package
    user_id = stable_user_id()
    source_id = models.CharField(max_length=512)
    attempts = models.IntegerField(default=0)
    last_error = models.CharField(max_length=128, blank=True, default="")  # a class name
    available_at = models.DateTimeField()
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "search_index_debt"
        verbose_name_plural = "search index debt"
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "user_id", "source_id"], name="search_index_debt_source_uq"
            ),
        ]
        indexes = [models.Index(fields=["available_at"], name="search_index_debt_due_ix")]

    def __str__(self) -> str:
        return f"{self.kind}:{self.source_id}"
