"""Finding listings: another user searches and reads what ada published; delisted and
banned-owner listings never show; trusted and featured ones rank first."""

from __future__ import annotations

import pytest
from django.utils import timezone

from apps.community.models import CommunityBan, CommunityListing
from tests.community.conftest import publish_package

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def test_another_user_finds_and_reads_a_published_listing(as_owner, as_outsider):
    listing = publish_package(as_owner, description="Sends a friendly greeting to a person.")
    found = as_outsider.call("communitySearch", query="friendly greeting")
    [hit] = found["results"]
    assert hit["listingId"] == listing["id"] and hit["owner"] == "ada"
    assert (hit["kodyId"], hit["name"]) == ("@ada/greeter", "greeter")
    assert found["nextCursor"] is None

    got = as_outsider.call("communityGet", listingId=listing["id"])["listing"]
    assert got["pinnedCommit"] == listing["pinnedCommit"] and got["readme"].startswith("# Greeter")
    assert got["ratingSummary"] == {"count": 0, "average": None, "adaptationEffortAverage": None}
    assert (got["starCount"], got["forkCount"]) == (0, 0)
    by_name = as_outsider.call("communityGet", owner="ada", kodyId="greeter")["listing"]
    assert by_name["id"] == listing["id"]


def test_delisted_and_banned_owner_listings_never_show(as_owner, as_outsider, as_third, owner):
    mine = publish_package(as_owner, name="weather", description="Weather forecast lookup.")
    theirs = publish_package(as_third, name="weather", description="Weather forecast lookup.")
    ids = {r["listingId"] for r in as_outsider.call("communitySearch", query="weather")["results"]}
    assert ids == {mine["id"], theirs["id"]}

    as_third.call("communityUnpublish", listingId=theirs["id"])
    CommunityBan.objects.create(user_id=owner.stable_user_id, banned_by_user_id="op")
    assert as_outsider.call("communitySearch", query="weather")["results"] == []
    assert as_outsider.call("communitySearch", query="")["results"] == []
    assert as_outsider.error("communityGet", 404, listingId=mine["id"])["code"] == (
        "listing_not_found"
    )
    assert as_outsider.error("communityGet", 404, listingId=theirs["id"])
    # The owner still reads their own delisted listing.
    assert as_third.call("communityGet", listingId=theirs["id"])["listing"]["status"] == "delisted"


def test_trusted_and_featured_listings_rank_first(as_owner, as_outsider, as_third):
    plain = publish_package(as_owner, name="notes", description="Take notes quickly.")
    boosted = publish_package(as_third, name="notes", description="Take notes quickly.")
    CommunityListing.objects.filter(id=boosted["id"]).update(
        featured_at=timezone.now(), trusted_commit=boosted["pinnedCommit"]
    )
    results = as_outsider.call("communitySearch", query="take notes")["results"]
    assert [r["listingId"] for r in results] == [boosted["id"], plain["id"]]
    assert results[0]["featured"] and results[0]["trusted"] and not results[1]["trusted"]


def test_category_tags_and_paging(as_owner, as_outsider):
    a = publish_package(as_owner, name="one", tags=("examples",), description="Alpha tool.")
    b = publish_package(as_owner, name="two", tags=("productivity",), description="Beta tool.")
    c = publish_package(as_owner, name="three", tags=("productivity", "x"), description="Tool.")
    found = as_outsider.call("communitySearch", query="tool", category="productivity")
    assert {r["listingId"] for r in found["results"]} == {b["id"], c["id"]}
    found = as_outsider.call("communitySearch", query="tool", tags=["x"])
    assert [r["listingId"] for r in found["results"]] == [c["id"]]
    first = as_outsider.call("communitySearch", query="tool", limit=2)
    second = as_outsider.call("communitySearch", query="tool", limit=2, cursor=first["nextCursor"])
    ids = [r["listingId"] for r in first["results"] + second["results"]]
    assert sorted(ids) == sorted([a["id"], b["id"], c["id"]]) and second["nextCursor"] is None
    assert as_outsider.error("communitySearch", 422, query="x", cursor="garbage!")
