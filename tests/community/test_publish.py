"""Publishing a package to the community: the listing pins the published commit, the KV
snapshot and the 256 px WebP icon follow it, and nobody else can publish or take it down."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from apps.community.models import (
    CommunityActivityEvent,
    CommunityBan,
    CommunityListing,
)
from apps.community.services import icons
from apps.packages.models import EntitySource, PackageKodyIdRedirect
from apps.packages.services.git import Author, commit_files, head, move_refs, read_tree
from apps.packages.services.git.refs import HEAD_REF
from kody.blobs import community_icon_key
from kody.blobs.buckets import list_prefix
from kody.kv import keys as kv_keys
from kody.kv import store as kv
from kody.vectors.index import COMMUNITY_NAMESPACE
from kody.vectors.models import VectorEntry
from tests.community.conftest import package_files, publish_package

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def png(width: int, height: int, colour: str = "#ff0000") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, "PNG")
    return out.getvalue()


def push(source: EntitySource, extra: dict[str, bytes]) -> str:
    """Commit extra files (binary ones too) on the package's branch, as a git push would."""
    parent = head(source.repo_id)
    files = {**read_tree(source.repo_id, parent), **extra}
    commit = commit_files(
        source.repo_id, files, parent=parent, message="icon", author=Author("Ada", "a@x.io")
    )
    move_refs(source.repo_id, [(HEAD_REF, parent, commit)])
    return commit


def icon_keys(listing_id: str) -> list[str]:
    return sorted(list_prefix(icons.BUCKET, f"community-icon:v3/{listing_id}/"))


def test_owner_publishes_a_listing_pinned_to_the_published_commit(as_owner, owner):
    listing = publish_package(as_owner, tags=("examples", "greeting"))
    assert listing["kodyId"] == "@ada/greeter"
    assert listing["url"].endswith("/@ada/greeter")
    row = CommunityListing.objects.get(id=listing["id"])
    source = EntitySource.objects.get(id=row.source_id)
    assert row.owner_user_id == owner.stable_user_id
    assert row.pinned_commit == listing["pinnedCommit"] == source.published_commit
    assert row.readme_content.startswith("# Greeter") and row.license == "MIT"
    assert row.category == "examples" and row.tags_json == ["examples", "greeting"]

    snap = kv.get_json(kv_keys.community_snapshot(row.id))
    assert snap["pinnedCommit"] == row.pinned_commit and snap["kodyId"] == "@ada/greeter"
    assert VectorEntry.objects.filter(namespace=COMMUNITY_NAMESPACE, vector_id=row.id).exists()
    [event] = CommunityActivityEvent.objects.filter(listing_id=row.id)
    assert event.event_type == "listing_published"
    assert event.actor_user_id == owner.stable_user_id

    # No icon in the package: a generated 256 px WebP stands in.
    assert icon_keys(row.id) == [community_icon_key(row.id, row.pinned_commit)]
    data, content_type = icons.read(row.id, row.pinned_commit)
    assert content_type == "image/webp"
    with Image.open(io.BytesIO(data)) as image:
        assert (image.format, image.size) == ("WEBP", (256, 256))


def test_a_real_png_icon_is_fitted_and_republish_prunes_the_old_commit(as_owner):
    listing = publish_package(as_owner)
    first_commit = listing["pinnedCommit"]
    source = EntitySource.objects.get(id=CommunityListing.objects.get(id=listing["id"]).source_id)
    push(source, {".kody/icon.png": png(1024, 512, "#00ff00")})
    as_owner.call("packagePublishExternalPush", packageId=listing["packageId"])

    again = as_owner.call("communityPublish", packageId=listing["packageId"])["listing"]
    assert again["id"] == listing["id"] and again["pinnedCommit"] != first_commit
    assert icon_keys(listing["id"]) == [community_icon_key(listing["id"], again["pinnedCommit"])]
    assert icons.read(listing["id"], first_commit) is None
    data, _ = icons.read(listing["id"], again["pinnedCommit"])
    with Image.open(io.BytesIO(data)) as image:
        assert image.format == "WEBP" and image.size == (256, 128)
        assert image.convert("RGB").getpixel((128, 64)) == pytest.approx((0, 255, 0), abs=8)
    events = CommunityActivityEvent.objects.filter(listing_id=listing["id"]).order_by("created_at")
    assert [e.event_type for e in events] == ["listing_published", "listing_updated"]


def test_a_broken_icon_falls_back_to_the_generated_one(as_owner):
    listing = publish_package(as_owner)
    source = EntitySource.objects.get(id=CommunityListing.objects.get(id=listing["id"]).source_id)
    push(source, {".kody/icon.png": b"\x89PNG not really"})
    as_owner.call("packagePublishExternalPush", packageId=listing["packageId"])
    again = as_owner.call("communityPublish", packageId=listing["packageId"])["listing"]
    data, _ = icons.read(listing["id"], again["pinnedCommit"])
    with Image.open(io.BytesIO(data)) as image:
        assert image.size == (256, 256)


def test_unpublish_delists_and_prunes_snapshot_icon_and_vector(as_owner):
    listing = publish_package(as_owner)
    as_owner.call("communityUnpublish", listingId=listing["id"])
    row = CommunityListing.objects.get(id=listing["id"])
    assert row.status == "delisted"
    assert kv.get(kv_keys.community_snapshot(row.id)) is None
    assert icon_keys(row.id) == [] and icons.read(row.id, row.pinned_commit) is None
    assert not VectorEntry.objects.filter(namespace=COMMUNITY_NAMESPACE, vector_id=row.id).exists()

    back = as_owner.call("communityPublish", packageId=listing["packageId"])["listing"]
    assert back["id"] == row.id
    assert CommunityListing.objects.get(id=row.id).status == "active"


def test_a_renamed_package_leaves_a_kody_id_redirect(as_owner, owner):
    listing = publish_package(as_owner)
    as_owner.call(
        "packageSave", files=package_files(name="welcomer"), packageId=listing["packageId"]
    )
    renamed = as_owner.call("communityPublish", packageId=listing["packageId"])["listing"]
    assert renamed["kodyId"] == "@ada/welcomer" and renamed["id"] == listing["id"]
    redirect = PackageKodyIdRedirect.objects.get(
        user_id=owner.stable_user_id, old_kody_id="@ada/greeter"
    )
    assert redirect.package_id == listing["packageId"]


def test_another_user_can_neither_publish_nor_unpublish_it(as_owner, as_outsider):
    listing = publish_package(as_owner)
    error = as_outsider.error("communityPublish", 404, packageId=listing["packageId"])
    assert error["code"] == "package_not_found"
    error = as_outsider.error("communityUnpublish", 404, listingId=listing["id"])
    assert error["code"] == "listing_not_found"
    assert CommunityListing.objects.get(id=listing["id"]).status == "active"
    assert CommunityListing.objects.count() == 1


def test_a_banned_user_cannot_publish(as_owner, owner, operator):
    package = as_owner.call("packageSave", files=package_files())["package"]
    CommunityBan.objects.create(user_id=owner.stable_user_id, banned_by_user_id="op")
    before = set(list_prefix(icons.BUCKET, "community-icon:v3/"))
    error = as_owner.error("communityPublish", 403, packageId=package["id"])
    assert error["code"] == "community_banned"
    assert not CommunityListing.objects.exists()
    assert set(list_prefix(icons.BUCKET, "community-icon:v3/")) == before


def test_an_unpublished_package_cannot_be_listed(as_owner):
    error = as_owner.error("communityPublish", 404, packageId="nope")
    assert error["code"] == "package_not_found"


def test_deleting_the_package_takes_its_listing_down(as_owner, as_outsider):
    listing = publish_package(as_owner)
    as_outsider.call("communityStar", listingId=listing["id"])
    as_owner.call("packageDelete", packageId=listing["packageId"])
    assert not CommunityListing.objects.filter(id=listing["id"]).exists()
    assert kv.get(kv_keys.community_snapshot(listing["id"])) is None
    assert icon_keys(listing["id"]) == []
    assert as_outsider.error("communityFork", 404, listingId=listing["id"])
    assert as_outsider.call("communityStarredList")["listings"] == []
