"""Forks: a listing's pinned commit copied into the forker's own new package, and adoption.

A fork is *inert* until adopted: the copy is the forker's package, but user secrets reach it
only through an explicit ``allowed_packages`` grant (apps.packages.services.secrets reads the
fork row). Adoption lifts that for read/use, like a self-authored package; writes from package
code always need the grant. The provenance row snapshots the listing's name and kody id so it
stays intelligible after the listing is gone. Person accounts reach platform packages only
through a fork (decision 0036): this is that path.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import transaction
from django.utils import timezone

from apps.community.models import CommunityFork, ForkActor
from apps.community.services import reads
from apps.community.services.listings import ListingNotFound, leaf
from apps.packages.models import EntitySource
from apps.packages.services import packages
from apps.packages.services.git import read_tree
from apps.packages.services.manifest import NAME_RE
from kody.errors import InvalidInput, NotFound


class ForkNotFound(NotFound):
    code = "fork_not_found"
    message = "No fork of yours with that id."


def to_json(fork: CommunityFork) -> dict[str, Any]:
    return {
        "id": fork.id,
        "packageId": fork.forked_package_id,
        "sourceId": fork.forked_source_id,
        "listingId": fork.listing_id,
        "listingName": fork.listing_name,
        "listingKodyId": fork.listing_kody_id,
        "originCommit": fork.origin_commit,
        "kodyId": fork.target_kody_id,
        "adoptedAt": fork.adopted_at.isoformat() if fork.adopted_at else None,
        "adoptionNote": fork.adoption_note,
        "actor": fork.actor,
        "createdAt": fork.created_at.isoformat(),
    }


def _renamed(files: dict[str, bytes], name: str) -> dict[str, bytes]:
    try:
        manifest = json.loads(files["package.json"].decode("utf-8"))
    except (KeyError, ValueError) as exc:
        raise InvalidInput("The listing's package.json cannot be read.") from exc
    manifest["name"] = name
    return {**files, "package.json": (json.dumps(manifest, indent=2) + "\n").encode()}


def fork(
    user: Any, listing_id: str, target_kody_id: str | None = None, *, surface: str = "api"
) -> dict[str, Any]:
    uid = user.stable_user_id
    listing = reads.find(None, listing_id)  # only visible listings can be forked
    name = f"@{user.username}/{target_kody_id or leaf(listing.kody_id)}"
    if not NAME_RE.match(name):
        raise InvalidInput(
            "targetKodyId must be a package name: lowercase letters, digits, '.', '_', '-'.",
            details={"targetKodyId": target_kody_id},
        )
    origin = EntitySource.objects.filter(
        id=listing.source_id, user_id=listing.owner_user_id
    ).first()
    if origin is None:
        raise ListingNotFound(details={"listingId": listing_id})
    files = _renamed(read_tree(origin.repo_id, listing.pinned_commit), name)
    made: dict[str, CommunityFork] = {}

    def provenance(package: Any, source: EntitySource) -> None:
        made["fork"] = CommunityFork.objects.create(
            listing_id=listing.id,
            forker_user_id=uid,
            origin_commit=listing.pinned_commit,
            forked_package_id=package.id,
            forked_source_id=source.id,
            target_kody_id=name,
            listing_name=listing.name,
            # Leaves only: provenance outlives the listing without naming its owner.
            listing_kody_id=leaf(listing.kody_id),
            actor=ForkActor.HUMAN if surface == "ui" else ForkActor.AGENT,
        )

    packages.save_files(
        user,
        files,
        message=f"Fork {listing.kody_id} at {listing.pinned_commit[:12]}",
        on_created=provenance,
    )
    return {"fork": to_json(made["fork"])}


def adopt(user_id: str, fork_id: str, note: str | None = None) -> dict[str, Any]:
    with transaction.atomic():
        row = (
            CommunityFork.objects.select_for_update()
            .filter(id=fork_id, forker_user_id=user_id)
            .first()
        )
        if row is None:
            raise ForkNotFound(details={"forkId": fork_id})
        if row.adopted_at is None:
            row.adopted_at = timezone.now()
        if note is not None:
            row.adoption_note = note
        row.save(update_fields=["adopted_at", "adoption_note"])
    return {"fork": to_json(row)}


def forget_package(user_id: str, package_id: str) -> int:
    """A deleted package takes its fork row with it (the seed's cascade)."""
    deleted, _ = CommunityFork.objects.filter(
        forker_user_id=user_id, forked_package_id=package_id
    ).delete()
    return deleted
