"""Forks: ben copies ada's listing into his own package, inert until he adopts it; deleting
the forked package removes the fork row; nobody adopts another person's fork."""

from __future__ import annotations

import json

import pytest

from apps.community.models import CommunityFork, CommunityListing
from apps.packages.models import EntitySource, SavedPackage
from apps.packages.services import secrets
from apps.packages.services.git import read_tree
from tests.community.conftest import publish_package

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def test_a_fork_copies_the_pinned_commit_into_the_forkers_own_package(
    as_owner, as_outsider, outsider
):
    listing = publish_package(as_owner)
    fork = as_outsider.call("communityFork", listingId=listing["id"])["fork"]
    package = SavedPackage.objects.get(id=fork["packageId"])
    assert package.user_id == outsider.stable_user_id and package.name == "@ben/greeter"
    source = EntitySource.objects.get(id=package.source_id)
    assert source.user_id == outsider.stable_user_id
    files = read_tree(source.repo_id, source.published_commit)
    assert json.loads(files["package.json"])["name"] == "@ben/greeter"
    assert files["mod.ts"].startswith(b"export function greet")

    row = CommunityFork.objects.get(id=fork["id"])
    assert row.origin_commit == listing["pinnedCommit"] and row.listing_id == listing["id"]
    assert (row.listing_name, row.listing_kody_id) == ("greeter", "greeter")
    assert row.actor == "agent" and row.adopted_at is None
    got = as_owner.call("communityGet", listingId=listing["id"])["listing"]
    assert got["forkCount"] == 1

    named = as_outsider.call("communityFork", listingId=listing["id"], targetKodyId="hello")
    assert SavedPackage.objects.get(id=named["fork"]["packageId"]).name == "@ben/hello"
    taken = as_outsider.error("communityFork", 409, listingId=listing["id"])
    assert taken["code"] == "package_name_taken"
    assert CommunityFork.objects.filter(forker_user_id=outsider.stable_user_id).count() == 2


def test_adoption_lets_the_fork_use_the_forkers_secrets(as_owner, as_outsider, outsider):
    listing = publish_package(as_owner)
    fork = as_outsider.call("communityFork", listingId=listing["id"])["fork"]
    uid = outsider.stable_user_id
    secrets.set_many(uid, [secrets.NewSecret("TOKEN", "s3cret", allowed_hosts=["api.example.com"])])

    def use() -> str:
        return secrets.resolve_for_use(
            uid, "TOKEN", package_id=fork["packageId"], host="api.example.com"
        )

    with pytest.raises(secrets.SecretNotGranted):
        use()  # inert: an unadopted fork needs the explicit grant

    adopted = as_outsider.call("communityForkAdopt", forkId=fork["id"], note="reviewed")["fork"]
    assert adopted["adoptedAt"] and adopted["adoptionNote"] == "reviewed"
    assert use() == "s3cret"


def test_nobody_else_adopts_a_fork_and_delisted_listings_cannot_be_forked(
    as_owner, as_outsider, as_third
):
    listing = publish_package(as_owner)
    fork = as_outsider.call("communityFork", listingId=listing["id"])["fork"]
    assert as_third.error("communityForkAdopt", 404, forkId=fork["id"])["code"] == "fork_not_found"
    assert as_owner.error("communityForkAdopt", 404, forkId=fork["id"])
    assert CommunityFork.objects.get(id=fork["id"]).adopted_at is None

    as_owner.call("communityUnpublish", listingId=listing["id"])
    assert as_third.error("communityFork", 404, listingId=listing["id"])["code"] == (
        "listing_not_found"
    )
    assert not SavedPackage.objects.filter(name="@cy/greeter").exists()


def test_deleting_the_forked_package_removes_the_fork_row(as_owner, as_outsider):
    listing = publish_package(as_owner)
    fork = as_outsider.call("communityFork", listingId=listing["id"])["fork"]
    as_outsider.call("packageDelete", packageId=fork["packageId"])
    assert not CommunityFork.objects.filter(id=fork["id"]).exists()
    assert CommunityListing.objects.filter(id=listing["id"]).exists()


def test_a_person_uses_a_platform_package_only_through_a_fork(as_outsider):
    """Decision 0036: a person's package cannot import an official package across accounts;
    forking it into their own scope is the way in."""
    from tests.accounts.factories import UserFactory
    from tests.community.conftest import package_files
    from tests.packages.conftest import Agent

    platform = Agent(UserFactory(username="kodyhq", account_type="platform"))
    listing = publish_package(platform, name="github", description="Official GitHub helpers.")
    user_code = {
        **package_files("ben", "mine"),
        "mod.ts": 'import { greet } from "kody:@kodyhq/github";\nexport const hi = greet("x");\n',
    }
    refused = as_outsider.error("packageSave", 422, files=user_code)
    assert "imports" in {c["name"] for c in refused["details"]["failed"]}

    as_outsider.call("communityFork", listingId=listing["id"])
    user_code["mod.ts"] = user_code["mod.ts"].replace("@kodyhq/github", "@ben/github")
    saved = as_outsider.call("packageSave", files=user_code)
    assert saved["package"]["name"] == "@ben/mine"
