"""Publishing a package to the community catalog and taking it down again.

A listing pins the package's *published* commit: its readme, manifest metadata and icon are
read from that commit in the source store, never from the working branch. Every write is the
owner's own: another user's package or listing id answers "not found".
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.community.models import (
    ActivityEventType,
    CommunityActivityEvent,
    CommunityBan,
    CommunityListing,
    ListingStatus,
)
from apps.community.services import icons
from apps.packages.models import PackageKodyIdRedirect
from apps.packages.services import packages
from apps.packages.services.git import read_tree
from apps.packages.services.manifest import ManifestError, parse
from kody import embeddings
from kody.errors import Conflict, Forbidden, InvalidInput, NotFound
from kody.kv import keys as kv_keys
from kody.kv import store as kv
from kody.vectors import index

README_MAX = 100_000
SEARCH_TEXT_MAX = 4000


class ListingNotFound(NotFound):
    code = "listing_not_found"
    message = "No community listing with that id."


class Banned(Forbidden):
    code = "community_banned"
    message = "This account may not publish to the community catalog."


class KodyIdTaken(Conflict):
    code = "kody_id_taken"
    message = "You already have an active listing with that kody id."


def leaf(kody_id: str) -> str:
    return kody_id.rsplit("/", 1)[-1]


def url_of(username: str, kody_id: str) -> str:
    return f"{settings.SITE_URL.rstrip('/')}/@{username}/{leaf(kody_id)}"


def is_banned(user_id: str) -> bool:
    return CommunityBan.objects.filter(user_id=user_id).exists()


def summary(listing: CommunityListing, username: str) -> dict[str, Any]:
    return {
        "id": listing.id,
        "kodyId": listing.kody_id,
        "url": url_of(username, listing.kody_id),
        "pinnedCommit": listing.pinned_commit,
    }


def owned(user_id: str, listing_id: str) -> CommunityListing:
    listing = CommunityListing.objects.filter(id=listing_id, owner_user_id=user_id).first()
    if listing is None:
        raise ListingNotFound(details={"listingId": listing_id})
    return listing


def _license(raw: dict[str, Any], files: dict[str, bytes]) -> str:
    value = raw.get("license")
    if isinstance(value, str) and value.strip():
        return value.strip()[:128]
    for name in ("LICENSE", "LICENSE.md", "LICENSE.txt"):
        if name in files:
            first = files[name].decode("utf-8", "replace").strip().splitlines()
            return (first[0] if first else "see LICENSE")[:128]
    return ""


def publish(user: Any, package_id: str) -> dict[str, Any]:
    uid = user.stable_user_id
    if is_banned(uid):
        raise Banned()
    package = packages.owned(uid, package_id)
    source = packages.source_of(package)
    commit = source.published_commit
    if not commit:
        raise InvalidInput(
            "The package has no published commit yet; save or publish it first.",
            code="package_unpublished",
            status=409,
        )
    files = read_tree(source.repo_id, commit)
    try:
        manifest = parse(files)
    except ManifestError as exc:
        raise InvalidInput(str(exc), code="manifest_invalid") from exc
    readme = files.get("README.md", b"").decode("utf-8", "replace")[:README_MAX]
    existing = CommunityListing.objects.filter(owner_user_id=uid, package_id=package.id).first()
    listing_id = existing.id if existing else CommunityListing().id
    icon, origin = icons.render(files, listing_id, manifest.short_name)
    icons.store(listing_id, commit, icon, origin)
    try:
        listing = _save(uid, listing_id, package, source.id, commit, manifest, readme, files)
    except BaseException:
        if existing is None or existing.pinned_commit != commit:
            icons.prune(listing_id, existing.pinned_commit if existing else None)
        raise
    icons.prune(listing.id, commit)
    _index(listing)
    return {"listing": summary(listing, user.username)}


def _save(
    uid: str,
    listing_id: str,
    package: Any,
    source_id: str,
    commit: str,
    manifest: Any,
    readme: str,
    files: dict[str, bytes],
) -> CommunityListing:
    now = timezone.now()
    try:
        with transaction.atomic():
            listing = (
                CommunityListing.objects.select_for_update()
                .filter(owner_user_id=uid, package_id=package.id)
                .first()
            )
            created = listing is None
            if listing is None:
                listing = CommunityListing(id=listing_id, owner_user_id=uid, package_id=package.id)
            old_kody_id = None if created else listing.kody_id
            was_active = not created and listing.status == ListingStatus.ACTIVE
            listing.source_id = source_id
            listing.kody_id = manifest.name
            listing.name = manifest.short_name
            listing.description = manifest.description
            listing.tags_json = list(manifest.tags)
            listing.category = manifest.category
            listing.readme_content = readme
            listing.license = _license(manifest.raw, files)
            listing.pinned_commit = commit
            listing.search_text = (
                f"{manifest.name}\n{manifest.description}\n{' '.join(manifest.tags)}\n{readme}"
            )[:SEARCH_TEXT_MAX]
            if not was_active:
                listing.published_at = now
            listing.status = ListingStatus.ACTIVE
            listing.save()
            if old_kody_id and old_kody_id != listing.kody_id:
                PackageKodyIdRedirect.objects.update_or_create(
                    user_id=uid, old_kody_id=old_kody_id, defaults={"package_id": package.id}
                )
            CommunityActivityEvent.objects.create(
                actor_user_id=uid,
                event_type=(
                    ActivityEventType.LISTING_UPDATED
                    if was_active
                    else ActivityEventType.LISTING_PUBLISHED
                ),
                listing_id=listing.id,
            )
            kv.put_json(kv_keys.community_snapshot(listing.id), snapshot(listing))
    except IntegrityError as exc:
        raise KodyIdTaken(details={"kodyId": manifest.name}) from exc
    return listing


def snapshot(listing: CommunityListing) -> dict[str, Any]:
    return {
        "listingId": listing.id,
        "ownerUserId": listing.owner_user_id,
        "kodyId": listing.kody_id,
        "name": listing.name,
        "description": listing.description,
        "tags": list(listing.tags_json),
        "category": listing.category,
        "license": listing.license,
        "pinnedCommit": listing.pinned_commit,
        "sourceId": listing.source_id,
        "readme": listing.readme_content,
        "publishedAt": listing.published_at.isoformat(),
    }


def _index(listing: CommunityListing) -> None:
    [vector] = embeddings.embed([listing.search_text or listing.name])
    index.upsert_community(
        listing.owner_user_id,
        index.Item(listing.id, vector, {"kind": "community_listing"}),
    )


def unpublish(user_id: str, listing_id: str) -> dict[str, Any]:
    with transaction.atomic():
        listing = (
            CommunityListing.objects.select_for_update()
            .filter(id=listing_id, owner_user_id=user_id)
            .first()
        )
        if listing is None:
            raise ListingNotFound(details={"listingId": listing_id})
        listing.status = ListingStatus.DELISTED
        listing.save(update_fields=["status", "updated_at"])
        kv.delete(kv_keys.community_snapshot(listing.id))
        index.delete_community([listing.id])
    icons.prune(listing.id, None)
    return {"listing": {"id": listing.id, "status": listing.status}}


def hard_delete(listing_id: str) -> None:
    """An operator's removal: the listing, the rows others left on it, its snapshot, icons and
    vector. Forks made from it keep their provenance rows (the seed's rule)."""
    from apps.community.models import CommunityRating, CommunityReport, CommunityStar

    with transaction.atomic():
        for model in (CommunityRating, CommunityStar, CommunityReport, CommunityActivityEvent):
            model.objects.filter(listing_id=listing_id).delete()
        CommunityListing.objects.filter(id=listing_id).delete()
        kv.delete(kv_keys.community_snapshot(listing_id))
        index.delete_community([listing_id])
    icons.prune(listing_id, None)
