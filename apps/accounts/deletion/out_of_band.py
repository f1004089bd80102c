"""The deletion's ``out_of_band`` step: everything of the user outside the public tables.

In order: blobs by reference (each actor's ``blob_references``, captured before its rows
go), the prefixes only an actor can list (``blob_prefixes``: repo session workspaces), every
declared owner prefix as defence in depth, the user's community listings' and repos' blobs and
KV families, the user's KV keys, vectors, each actor's ``purge``, and last the user's schema.
Every part is rerun-safe: the rows that name listings and repos go only in the later
``database`` step, so a rerun finds them again.
"""

from __future__ import annotations

from django.db import connection

from apps.accounts.actor_surfaces import actor_surfaces
from apps.accounts.deletion.report import StepReport
from apps.accounts.models import AccountDeletion
from apps.accounts.out_of_band_surfaces import OUT_OF_BAND_SURFACES
from apps.accounts.ownership import Owner
from kody.actors.base import actor_named

REF_PAGE = 500


def step(deletion: AccountDeletion, owner: Owner, report: StepReport) -> None:
    from kody import blobs
    from kody.kv import store
    from kody.userschema.schemas import has_actor_state, purge_schema
    from kody.vectors import index

    surfaces = actor_surfaces() if deletion.result.get("actor_state", True) else {}
    # An actor that never ran for this user has no tables (kody.userschema.tablesets): its
    # hooks would create them only to find nothing, so they are skipped.
    surfaces = {
        name: surface
        for name, surface in surfaces.items()
        if has_actor_state(owner.stable_id, surface.actor)
    }
    # Blobs by reference, captured from each actor before its rows go.
    removed = 0
    for surface in surfaces.values():
        if not surface.blob_references:
            continue
        actor = actor_named(surface.actor)
        cursor = None
        while True:
            page = actor.call(
                owner.stable_id, surface.blob_references, cursor=cursor, limit=REF_PAGE
            )
            # One batched delete per bucket and page (S3 DeleteObjects), not a request per blob.
            by_bucket: dict[str, list[str]] = {}
            for ref in page["references"]:
                by_bucket.setdefault(ref["bucket"], []).append(ref["key"])
            for name, keys in by_bucket.items():
                blobs.delete_keys(name, keys)
                removed += len(keys)
            cursor = page.get("next_cursor")
            if not cursor:
                break
    report.deleted["blobs_by_reference"] = removed
    # Prefixes only an actor can list (repo session workspaces, keyed by session id): an
    # inventory that cannot be read raises here and keeps the account (fail closed).
    for surface in surfaces.values():
        if not surface.blob_prefixes:
            continue
        listed = actor_named(surface.actor).call(owner.stable_id, surface.blob_prefixes)
        for item in listed["prefixes"]:
            counter = f"blob:{item['bucket']}:{surface.blob_prefixes}"
            purged = blobs.purge_prefix(item["bucket"], item["prefix"])
            report.deleted[counter] = report.deleted.get(counter, 0) + purged
    # Then every owner prefix, as defence in depth (and for blobs no actor points at).
    for surface in OUT_OF_BAND_SURFACES:
        if surface.kind == "blob_prefix" and "{userId}" in surface.name:
            prefix = surface.name.replace("{userId}", owner.stable_id)
            report.deleted[f"blob:{surface.extra['bucket']}:{surface.name}"] = blobs.purge_prefix(
                surface.extra["bucket"], prefix
            )
    for prefix, bucket in _listing_icon_prefixes(owner):
        report.deleted.setdefault("blob:community_icons", 0)
        report.deleted["blob:community_icons"] += blobs.purge_prefix(bucket, prefix)
    report.deleted["kv:community_listings"] = sum(
        store.delete_prefix(surface.name.replace("{listingId}", listing))
        for listing in _listing_ids(owner)
        for surface in OUT_OF_BAND_SURFACES
        if surface.kind == "listing_kv_prefix"
    )
    _repo_sources_out_of_band(owner, report)
    report.deleted["kv"] = store.delete_user_keys(owner.stable_id)
    for surface in OUT_OF_BAND_SURFACES:
        if surface.kind == "kv_prefix" and "{userId}" in surface.name:
            report.deleted["kv"] += store.delete_prefix(
                surface.name.replace("{userId}", owner.stable_id)
            )
    report.deleted["vectors"] = index.delete_all_for_user(owner.stable_id)
    for surface in surfaces.values():
        answer = actor_named(surface.actor).call(owner.stable_id, surface.purge)
        counts = answer.get("deleted", {}) if isinstance(answer, dict) else {}
        for table, count in counts.items():
            report.deleted[f"{surface.actor}:{table}"] = int(count)
    report.deleted["user_schema"] = int(purge_schema(owner.stable_id))


def _repo_sources_out_of_band(owner: Owner, report: StepReport) -> None:
    """Every repo of the user (``entity_sources``): its git packs and refs, identity icons and
    the per-source KV families declared with ``{repoId}`` / ``{sourceId}``. Rerun-safe: the
    rows that name the repos go only in the ``database`` step."""
    from kody import blobs
    from kody.kv import store

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, repo_id FROM entity_sources WHERE user_id = %s", [owner.stable_id]
        )
        repos = cursor.fetchall()
    for counter in ("blob:source_repos", "kv:repo_sources", "source_repo_refs"):
        report.deleted.setdefault(counter, 0)
    for source_id, repo_id in repos:
        for surface in OUT_OF_BAND_SURFACES:
            if surface.kind == "blob_prefix" and "{repoId}" in surface.name:
                prefix = surface.name.replace("{repoId}", repo_id)
                report.deleted["blob:source_repos"] += blobs.purge_prefix(
                    surface.extra["bucket"], prefix
                )
            elif surface.kind == "repo_kv_prefix":
                prefix = surface.name.replace("{sourceId}", source_id).replace("{repoId}", repo_id)
                report.deleted["kv:repo_sources"] += store.delete_prefix(prefix)
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM source_repo_refs WHERE repo_id = %s", [repo_id])
            report.deleted["source_repo_refs"] += cursor.rowcount


def _listing_ids(owner: Owner) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM community_listings WHERE owner_user_id = %s", [owner.stable_id]
        )
        return [row[0] for row in cursor.fetchall()]


def _listing_icon_prefixes(owner: Owner) -> list[tuple[str, str]]:
    """``community-icon:v*/{listingId}/`` of the user's own listings and
    ``identity-icon:v1/{repoId}/`` of the user's repos."""
    with connection.cursor() as cursor:
        # Identity icons hang off the user's repos (seed: every entity_sources.repo_id).
        cursor.execute("SELECT repo_id FROM entity_sources WHERE user_id = %s", [owner.stable_id])
        repo_ids = [row[0] for row in cursor.fetchall()]
    prefixes = []
    for listing in _listing_ids(owner):
        for version in ("v1", "v2", "v3"):
            prefixes.append((f"community-icon:{version}/{listing}/", "community_assets"))
    for repo in repo_ids:
        if repo and "/" not in repo:
            prefixes.append((f"identity-icon:v1/{repo}/", "community_assets"))
    return prefixes
