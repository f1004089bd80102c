"""Durable repo sources: the ``entity_sources`` pointer rows and their git repos.

Creating a source fails closed: the repo's marker blob is written first, and no ``source_id``
row exists unless that write succeeded (seed 000, ``requirePersistence``).
"""

from __future__ import annotations

import uuid

from django.core.files.base import ContentFile
from django.db import transaction
from django.utils import timezone

from apps.packages.models import EntitySource, PublishedBundleArtifact, UserStorageBucket
from apps.packages.models.runtime import StorageBucketKind
from apps.packages.services.git import BUCKET, head
from apps.packages.services.git.objects import repo_prefix
from apps.packages.services.git.refs import delete_all as delete_all_refs
from kody.blobs import bucket, purge_prefix
from kody.errors import NotFound
from kody.kv import store as kv


class SourceNotFound(NotFound):
    code = "source_not_found"
    message = "No such repository."


def new_repo_id() -> str:
    return f"repo-{uuid.uuid4().hex}"


def create_source(
    user_id: str, kind: str, entity_id: str, *, source_id: str | None = None
) -> EntitySource:
    repo_id = new_repo_id()
    # The marker makes the repo exist in the store before anything can point at it.
    bucket(BUCKET).save(f"{repo_prefix(repo_id)}description", ContentFile(b"kody repo\n"))
    fields = {"user_id": user_id, "entity_kind": kind, "entity_id": entity_id, "repo_id": repo_id}
    if source_id:
        fields["id"] = source_id
    return EntitySource.objects.create(**fields)


def owned(user_id: str, source_id: str) -> EntitySource:
    found = EntitySource.objects.filter(user_id=user_id, id=source_id).first()
    if found is None:
        raise SourceNotFound(details={"sourceId": source_id})
    return found


def default_head(source: EntitySource) -> str | None:
    return head(source.repo_id)


def purge(source: EntitySource) -> None:
    """Everything derived from one source: KV snapshots and bundles, bundle rows, refs, the
    pointer row, then the repo's packs and identity icons (blobs after the rows commit; a
    crash in between leaves only unreachable blobs under prefixes the deletion sweep purges)."""
    with transaction.atomic():
        for prefix in derived_kv_prefixes(source):
            kv.delete_prefix(prefix)
        PublishedBundleArtifact.objects.filter(source_id=source.id).delete()
        EntitySource.objects.filter(id=source.id).delete()
        # The source's bytes leave the storage estimate with it (the release).
        UserStorageBucket.objects.filter(
            user_id=source.user_id,
            storage_id__in=[storage_id(source.id), f"git:{source.repo_id}"],
        ).delete()
        delete_all_refs(source.repo_id)
    purge_prefix(BUCKET, repo_prefix(source.repo_id))
    purge_prefix("community_assets", identity_icon_prefix(source.repo_id))


def derived_kv_prefixes(source: EntitySource) -> list[str]:
    return [
        f"source-snapshot:v1:{source.id}:",
        f"source-manifest-snapshot:v1:{source.id}:",
        f"bundle-artifact:v1:{source.id}:",
        f"derived-cache:v1:identity-icon:v1:{source.repo_id}:",
    ]


def identity_icon_prefix(repo_id: str) -> str:
    return f"identity-icon:v1/{repo_id}/"


# --- the published tree in the storage estimate ----------------------------------------------
# A source's git objects live in the blob store, outside the rows reconciliation measures. Its
# published tree is inventoried in ``user_storage_buckets`` (kind ``source``) beside the
# StorageRunner buckets, so it counts against storage_bytes and survives reconciliation.


def storage_id(source_id: str) -> str:
    return f"source:{source_id}"


def tree_bytes(files: dict[str, bytes]) -> int:
    """What a published tree weighs: its paths and file contents."""
    return sum(len(path.encode()) + len(body) for path, body in files.items())


def recorded_bytes(user_id: str, source_id: str) -> int:
    found = (
        UserStorageBucket.objects.filter(user_id=user_id, storage_id=storage_id(source_id))
        .values_list("estimated_bytes", flat=True)
        .first()
    )
    return int(found or 0)


def record_bytes(user_id: str, source_id: str, size: int) -> None:
    now = timezone.now()
    UserStorageBucket.objects.update_or_create(
        user_id=user_id,
        storage_id=storage_id(source_id),
        defaults={
            "kind": StorageBucketKind.SOURCE,
            "last_seen_at": now,
            "estimated_bytes": size,
            "estimated_bytes_updated_at": now,
        },
    )
