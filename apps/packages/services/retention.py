"""Retention of the packages domain's usage trail (seed 000 "Growth and retention policies")."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Exists, OuterRef
from django.utils import timezone

from apps.packages.models import (
    AgentPackageConversationUse,
    EntitySource,
    PublishedBundleArtifact,
    RepoSessionDueOwner,
)
from kody.kv import keys, store
from kody.retention import prune_oldest

CONVERSATION_USE_DAYS = 180
BUNDLE_ARTIFACT_DAYS = 30


def prune_conversation_uses(batch: int) -> int:
    """Which conversations used a package: kept 180 days after the last use."""
    cutoff = timezone.now() - timedelta(days=CONVERSATION_USE_DAYS)
    rows = AgentPackageConversationUse.objects.filter(last_used_at__lt=cutoff)
    return prune_oldest(rows, "last_used_at", batch)


def prune_bundle_artifacts(batch: int) -> int:
    """Bundle artifacts older than 30 days whose commit is no longer published by any
    matching source, and whose owner has no repo session (seed 000). The session catalog is
    the owner's RepoSessionIndex; its public hint (``repo_session_due_owners``) only says
    whether the owner has any session, so an owner with one keeps every artifact — an
    ambiguous case, kept. KV blobs go before their rows; a commit's source and manifest
    snapshots go with its last artifact row."""
    current = EntitySource.objects.filter(
        id=OuterRef("source_id"), published_commit=OuterRef("published_commit")
    )
    in_session = RepoSessionDueOwner.objects.filter(user_id=OuterRef("user_id"))
    cutoff = timezone.now() - timedelta(days=BUNDLE_ARTIFACT_DAYS)
    rows = (
        PublishedBundleArtifact.objects.filter(created_at__lt=cutoff)
        .exclude(Exists(current))
        .exclude(Exists(in_session))
    )
    doomed = list(
        rows.order_by("created_at", "id").values_list(
            "id", "kv_key", "source_id", "published_commit"
        )[:batch]
    )
    for _id, kv_key, _source, _commit in doomed:
        store.delete(kv_key)
    deleted = rows.filter(id__in=[row[0] for row in doomed]).delete()[0]
    for source_id, commit in {(row[2], row[3]) for row in doomed}:
        left = PublishedBundleArtifact.objects.filter(source_id=source_id, published_commit=commit)
        if not left.exists():
            _delete_snapshots(source_id, commit)
    return int(deleted)


def _delete_snapshots(source_id: str, commit: str) -> None:
    try:
        snapshot_keys = [
            keys.source_snapshot(source_id, commit),
            keys.source_manifest_snapshot(source_id, commit),
        ]
    except keys.BadKeySegment:
        return  # no key can have been written under an id like this
    for key in snapshot_keys:
        store.delete(key)
