"""The packages_retention lane prunes memory suppressions expired and unseen for 90 days."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.packages.models import McpMemory, McpMemoryConversationSuppression
from kody.lanes import registry, run_lane
from tests.packages.factories import McpMemoryConversationSuppressionFactory, McpMemoryFactory

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def suppression(memory: McpMemory, conversation: str, *, seen_days_ago: int, expired: bool):
    now = timezone.now()
    return McpMemoryConversationSuppressionFactory(
        user_id=memory.user_id,
        conversation_id=conversation,
        memory=memory,
        last_seen_at=now - timedelta(days=seen_days_ago),
        expires_at=now - timedelta(hours=1) if expired else now + timedelta(hours=1),
    )


def test_retention_keeps_active_and_recent_suppressions(owner, outsider):
    mine = McpMemoryFactory(user_id=owner.stable_user_id, subject="a", summary="b")
    theirs = McpMemoryFactory(user_id=outsider.stable_user_id, subject="c", summary="d")
    old = suppression(mine, "old", seen_days_ago=91, expired=True)
    recent = suppression(mine, "recent", seen_days_ago=89, expired=True)
    active = suppression(mine, "active", seen_days_ago=200, expired=False)
    other_old = suppression(theirs, "old", seen_days_ago=120, expired=True)

    assert registry.get("packages_retention").cadence == registry.Cadence.HOURLY
    run = run_lane("packages_retention")
    assert run is not None and run.items == 2
    left = set(McpMemoryConversationSuppression.objects.values_list("pk", flat=True))
    assert left == {recent.pk, active.pk}
    assert old.pk not in left and other_old.pk not in left


def test_conversation_uses_are_kept_180_days_after_the_last_use(owner, outsider):
    from apps.packages.models import AgentPackageConversationUse
    from tests.packages.factories import AgentPackageConversationUseFactory

    now = timezone.now()
    old = AgentPackageConversationUseFactory(
        user_id=owner.stable_user_id, conversation_id="old", last_used_at=now - timedelta(days=181)
    )
    recent = AgentPackageConversationUseFactory(
        user_id=owner.stable_user_id, conversation_id="new", last_used_at=now - timedelta(days=179)
    )
    theirs = AgentPackageConversationUseFactory(
        user_id=outsider.stable_user_id, last_used_at=now - timedelta(days=400)
    )
    run_lane("packages_retention")
    left = set(AgentPackageConversationUse.objects.values_list("pk", flat=True))
    assert left == {recent.pk} and old.pk not in left and theirs.pk not in left


def test_old_artifacts_of_unpublished_commits_go_with_their_blobs_and_snapshots(owner, outsider):
    from apps.packages.models import PublishedBundleArtifact
    from kody.kv import keys, store
    from tests.packages.factories import (
        EntitySourceFactory,
        PublishedBundleArtifactFactory,
        RepoSessionDueOwnerFactory,
    )

    mine, theirs = owner.stable_user_id, outsider.stable_user_id
    source = EntitySourceFactory(user_id=mine, published_commit="c2")

    def artifact(user: str, source_id: str, commit: str, entry: str, days_old: int):  # type: ignore[no-untyped-def]
        row = PublishedBundleArtifactFactory(
            user_id=user,
            source_id=source_id,
            published_commit=commit,
            entry_point=entry,
            kv_key=keys.bundle_artifact(source_id, commit, "export", None, entry),
        )
        store.put(row.kv_key, b"bundle")
        PublishedBundleArtifact.objects.filter(pk=row.pk).update(
            created_at=timezone.now() - timedelta(days=days_old)
        )
        return row

    old = artifact(mine, source.id, "c1", "a.ts", 31)  # c1 is no longer published
    old_sibling = artifact(mine, source.id, "c1", "b.ts", 31)
    current = artifact(mine, source.id, "c2", "c.ts", 60)  # the published commit stays
    recent = artifact(mine, "src-gone", "c9", "d.ts", 29)  # too young
    in_session = artifact(theirs, "src-theirs", "c1", "e.ts", 90)
    RepoSessionDueOwnerFactory(user_id=theirs)  # an owner with a repo session keeps all
    for key in (
        keys.source_snapshot(source.id, "c1"),
        keys.source_manifest_snapshot(source.id, "c1"),
    ):
        store.put(key, b"snapshot")

    run_lane("packages_retention")
    left = set(PublishedBundleArtifact.objects.values_list("pk", flat=True))
    assert left == {current.pk, recent.pk, in_session.pk}
    assert store.get(old.kv_key) is None and store.get(old_sibling.kv_key) is None
    assert store.get(current.kv_key) == b"bundle"
    assert store.get(keys.source_snapshot(source.id, "c1")) is None
    assert store.get(keys.source_manifest_snapshot(source.id, "c1")) is None
