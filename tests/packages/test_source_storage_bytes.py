"""A package's published source counts against storage_bytes: a publish that would pass the
plan's limit is refused with the coded limit error and stores nothing; deleting the package
gives its bytes back. The inventory row cannot be forged through bucket storage."""

from __future__ import annotations

import pytest

from apps.entitlements.plans import limit_for
from apps.entitlements.services import metering
from apps.entitlements.services.enforcement import current_use
from apps.packages.models import EntitySource, SavedPackage, UserStorageBucket
from apps.packages.services import sources
from tests.packages.test_package_exports import package_files

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

MOD = "export default () => 1;\n"


def used(user) -> int:  # type: ignore[no-untyped-def]
    return int(current_use(user.stable_user_id, "storage_bytes") or 0)


def files(name: str, padding: int = 0) -> dict[str, str]:
    return package_files(name, {"mod.ts": MOD + "// " + "x" * padding + "\n"}, {".": "./mod.ts"})


def weight(tree: dict[str, str]) -> int:
    return sources.tree_bytes({p: b.encode() for p, b in tree.items()})


def test_a_published_tree_counts_and_a_delete_releases_it(as_owner, owner):
    tree = files("small")
    package = as_owner.call("packageSave", files=tree)["package"]
    row = UserStorageBucket.objects.get(user_id=owner.stable_user_id)
    assert row.kind == "source" and row.storage_id == f"source:{package['sourceId']}"
    assert row.estimated_bytes == weight(tree)
    assert used(owner) >= weight(tree)
    # A republish records the new tree's weight, not the sum of both.
    bigger = files("small", padding=300)
    as_owner.call("packageSave", files=bigger, packageId=package["id"])
    row.refresh_from_db()
    assert row.estimated_bytes == weight(bigger)

    before = used(owner)
    as_owner.call("packageDelete", packageId=package["id"])
    assert not UserStorageBucket.objects.filter(user_id=owner.stable_user_id).exists()
    assert used(owner) == before - weight(bigger)


def test_a_publish_over_the_storage_limit_is_refused_and_nothing_is_stored(
    as_owner, owner, as_outsider
):
    limit = limit_for(owner.plan, "storage_bytes")
    metering.reserve_storage_bytes(owner.stable_user_id, limit - used(owner) - 200, limit)
    error = as_owner.error("packageSave", 429, files=files("big", padding=2000))
    assert error["code"] == "limit_reached" and error["details"]["resource"] == "storage_bytes"
    assert not SavedPackage.objects.filter(user_id=owner.stable_user_id).exists()
    assert not EntitySource.objects.filter(user_id=owner.stable_user_id).exists()
    assert not UserStorageBucket.objects.filter(user_id=owner.stable_user_id).exists()
    assert used(owner) == limit - 200
    # The outsider's meter is their own: the same files publish for them.
    outsider_files = {**files("big", padding=2000)}
    outsider_files["package.json"] = outsider_files["package.json"].replace("@ada/", "@ben/")
    assert as_outsider.call("packageSave", files=outsider_files)["package"]["publishedCommit"]


def test_bucket_storage_cannot_write_over_a_source_inventory_row(as_owner, owner):
    package = as_owner.call("packageSave", files=files("kept"))["package"]
    forged = f"source:{package['sourceId']}"
    error = as_owner.error("storageSet", 422, storageId=forged, key="k", value=1)
    assert error["code"] == "invalid_storage_id"
    as_owner.error("storageDelete", 422, storageId=forged, key="k")
    assert UserStorageBucket.objects.get(user_id=owner.stable_user_id).kind == "source"
