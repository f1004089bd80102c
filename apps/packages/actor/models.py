"""The RepoSessionIndex actor's tables in each user's schema (SCHEMA.md §2.4, index schema v1).

No user_id column: the schema is the user, and ``repo_session_index_owner_identity`` repeats
the owner so every call can check it. The workspace of each session (the files it changed
against its base commit) lives beside the catalog in the same schema, keyed by session id:
the original kept one object per session id, so the session id is the workspace's key here
too, and a session id that is not in the caller's own catalog is simply not found.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from kody.userschema import ActorModel

# The per-user schema version that brought these tables (6 is the lean-index upgrade).
REPO_SESSIONS_SCHEMA = 7
# The original's RepoSessionIndex schema version (recorded in repo_session_index_meta).
INDEX_VERSION = 1

STATUSES = ("active", "published", "discarded")


class RepoSessionIndexMeta(ActorModel):
    key = models.CharField(max_length=64, primary_key=True, db_collation="C")
    value = models.TextField()

    actor_version = REPO_SESSIONS_SCHEMA

    class Meta:
        db_table = "repo_session_index_meta"


class RepoSessionIndexOwnerIdentity(ActorModel):
    id = models.SmallIntegerField(primary_key=True, default=1)
    owner_id = models.CharField(max_length=64)

    actor_version = REPO_SESSIONS_SCHEMA

    class Meta:
        db_table = "repo_session_index_owner_identity"
        constraints = [
            models.CheckConstraint(condition=Q(id=1), name="repo_session_index_owner_singleton")
        ]


class RepoSession(ActorModel):
    id = models.CharField(max_length=64, primary_key=True, db_collation="C")
    source_id = models.CharField(max_length=64)
    source_repo_id = models.CharField(max_length=64)
    session_branch = models.CharField(max_length=255)
    source_branch = models.CharField(max_length=255)
    base_commit = models.CharField(max_length=64)
    source_root = models.CharField(max_length=255, default="")
    conversation_id = models.CharField(max_length=255, null=True)  # noqa: DJ001
    status = models.CharField(max_length=16, default="active")
    expires_at = models.DateTimeField()
    last_checkpoint_at = models.DateTimeField(null=True)
    last_checkpoint_commit = models.CharField(max_length=64, null=True)  # noqa: DJ001
    last_check_run_id = models.CharField(max_length=64, null=True)  # noqa: DJ001
    last_check_tree_hash = models.CharField(max_length=64, null=True)  # noqa: DJ001
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    actor_version = REPO_SESSIONS_SCHEMA

    class Meta:
        db_table = "repo_sessions"
        indexes = [
            models.Index(fields=["conversation_id", "status"], name="repo_sessions_conv_ix"),
            models.Index(fields=["expires_at", "id"], name="repo_sessions_cleanup_ix"),
            models.Index(fields=["status"], name="repo_sessions_status_ix"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=STATUSES), name="repo_sessions_status")
        ]


class RepoSessionFile(ActorModel):
    """One path of a session's working tree that differs from its base commit: new content
    (inline, or spilled to ``repo_session_blobs`` under the session's prefix) or a deletion."""

    session_id = models.CharField(max_length=64, db_collation="C")
    path = models.CharField(max_length=1024, db_collation="C")
    deleted = models.BooleanField(default=False)
    content = models.BinaryField(null=True)
    blob_key = models.CharField(max_length=600, null=True)  # noqa: DJ001
    size = models.BigIntegerField(default=0)
    sha = models.CharField(max_length=64, default="")
    updated_at = models.DateTimeField()

    actor_version = REPO_SESSIONS_SCHEMA

    class Meta:
        db_table = "repo_session_files"
        constraints = [
            models.UniqueConstraint(fields=["session_id", "path"], name="repo_session_files_uq")
        ]


class RepoSessionCheckRun(ActorModel):
    """The publish checks run on one working tree (by tree hash), without publishing."""

    id = models.CharField(max_length=64, primary_key=True, db_collation="C")
    session_id = models.CharField(max_length=64, db_collation="C")
    tree_hash = models.CharField(max_length=64)
    status = models.CharField(max_length=16)
    checks = models.JSONField(default=list)
    created_at = models.DateTimeField()

    actor_version = REPO_SESSIONS_SCHEMA

    class Meta:
        db_table = "repo_session_check_runs"
        indexes = [models.Index(fields=["session_id", "tree_hash"], name="repo_session_runs_ix")]
