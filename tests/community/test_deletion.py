"""Deleting a publisher and then a forker leaves exactly what the seed's pairing rules say:
the publisher's listings go with every row others left on them, their snapshot, icon objects
and descriptors; forks made from the listing stay with their provenance snapshot; the
forker's own rows go with the forker. The residue scan finds nothing of either person."""

from __future__ import annotations

import secrets

import pytest

from apps.community.models import (
    CommunityActivityEvent,
    CommunityFork,
    CommunityListing,
    CommunityRating,
    CommunityReport,
    CommunityStar,
    UserFollow,
)
from apps.community.services import icons
from apps.packages.models import SavedPackage
from kody.blobs.buckets import list_prefix
from kody.kv import keys as kv_keys
from kody.kv import store as kv
from kody.kv.models import KvEntry
from kody.vectors.index import COMMUNITY_NAMESPACE
from kody.vectors.models import VectorEntry
from tests.accounts.factories import UserFactory
from tests.accounts.test_deletion import purge, traces_of
from tests.community.conftest import publish_package
from tests.packages.conftest import Agent

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


@pytest.fixture(autouse=True)
def _quick_drain(settings):  # type: ignore[no-untyped-def]
    settings.KODY_DELETION_DRAIN_SECONDS = 0.3


def person(name: str) -> Agent:
    # Run-unique usernames: the residue scan looks for them in every text column.
    return Agent(UserFactory(username=f"{name}-{secrets.token_hex(3)}"))


def test_deleting_a_publisher_and_then_a_forker(operator):
    ada, ben, cy = person("ada"), person("ben"), person("cy")
    mine = publish_package(ada)
    theirs = publish_package(cy, name="notes", description="Take notes.")
    fork = ben.call("communityFork", listingId=mine["id"])["fork"]
    ben.call("communityRate", listingId=mine["id"], stars=4, adaptationEffort=2, note="ok")
    ben.call("communityStar", listingId=mine["id"])
    ben.call("communityReport", listingId=mine["id"], reason="looks off")
    ben.call("communityFollow", username=ada.user.username)
    # ada's own rows on cy's listing and about cy.
    ada.call("communityRate", listingId=theirs["id"], stars=5, adaptationEffort=1)
    ada.call("communityStar", listingId=theirs["id"])
    ada.call("communityFollow", username=cy.user.username)
    ada_fork = ada.call("communityFork", listingId=theirs["id"])["fork"]
    ada.call("communityReport", listingId=theirs["id"], reason="dup")
    CommunityReport.objects.filter(reporter_user_id=ben.user.stable_user_id).update(
        resolved_by_user_id=ada.user.stable_user_id
    )
    CommunityListing.objects.filter(id=theirs["id"]).update(
        trusted_commit=theirs["pinnedCommit"], trusted_by_user_id=ada.user.stable_user_id
    )
    assert list(list_prefix(icons.BUCKET, f"community-icon:v3/{mine['id']}/"))

    a = ada.user
    purge(a.email)

    assert not CommunityListing.objects.filter(id=mine["id"]).exists()
    assert not CommunityRating.objects.filter(listing_id=mine["id"]).exists()
    assert not CommunityStar.objects.filter(listing_id=mine["id"]).exists()
    assert not CommunityReport.objects.filter(listing_id=mine["id"]).exists()
    assert kv.get(kv_keys.community_snapshot(mine["id"])) is None
    assert not KvEntry.objects.filter(key__contains=mine["id"]).exists()
    assert list(list_prefix(icons.BUCKET, f"community-icon:v3/{mine['id']}/")) == []
    assert not VectorEntry.objects.filter(namespace=COMMUNITY_NAMESPACE, vector_id=mine["id"])
    # ben's fork of the deleted listing keeps its provenance snapshot and its package.
    kept = CommunityFork.objects.get(id=fork["id"])
    assert (kept.listing_name, kept.listing_kody_id) == ("greeter", "greeter")
    assert kept.origin_commit == mine["pinnedCommit"]
    assert SavedPackage.objects.filter(id=fork["packageId"]).exists()
    # ada's rows on cy's listing went with ada; cy's listing and its other rows stay.
    assert not CommunityRating.objects.filter(user_id=a.stable_user_id).exists()
    assert not CommunityStar.objects.filter(user_id=a.stable_user_id).exists()
    assert not CommunityFork.objects.filter(id=ada_fork["id"]).exists()
    assert not UserFollow.objects.exists()
    assert not CommunityReport.objects.filter(reporter_user_id=a.stable_user_id).exists()
    cy_listing = CommunityListing.objects.get(id=theirs["id"])
    assert cy_listing.trusted_by_user_id == "deleted-user"
    assert cy_listing.trusted_commit == theirs["pinnedCommit"]
    assert kv.get(kv_keys.community_snapshot(theirs["id"])) is not None
    assert traces_of(a.stable_user_id, a.email, a.username) == []

    b = ben.user
    purge(b.email)
    assert not CommunityFork.objects.filter(id=fork["id"]).exists()
    assert not SavedPackage.objects.filter(id=fork["packageId"]).exists()
    assert traces_of(b.stable_user_id, b.email, b.username) == []
    assert not CommunityActivityEvent.objects.exclude(actor_user_id=cy.user.stable_user_id)
    assert cy.call("communityGet", listingId=theirs["id"])["listing"]["kodyId"].endswith("/notes")
