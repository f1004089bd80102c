"""Ratings, stars, follows, the timeline and profiles among ada, ben and cy."""

from __future__ import annotations

import pytest

from apps.community.models import CommunityRating, CommunityStar, UserFollow
from tests.community.conftest import publish_package

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def test_ratings_are_one_per_user_updatable_and_never_on_ones_own(as_owner, as_outsider, as_third):
    listing = publish_package(as_owner)
    as_outsider.call("communityRate", listingId=listing["id"], stars=2, adaptationEffort=4)
    again = as_outsider.call(
        "communityRate", listingId=listing["id"], stars=4, adaptationEffort=2, note="nice"
    )
    assert again["rating"]["stars"] == 4
    as_third.call("communityRate", listingId=listing["id"], stars=5, adaptationEffort=1)
    assert CommunityRating.objects.filter(listing_id=listing["id"]).count() == 2
    summary = as_third.call("communityGet", listingId=listing["id"])["listing"]["ratingSummary"]
    assert summary == {"count": 2, "average": 4.5, "adaptationEffortAverage": 1.5}

    own = as_owner.error("communityRate", 403, listingId=listing["id"], stars=5, adaptationEffort=1)
    assert own["code"] == "own_listing"
    assert as_outsider.error(
        "communityRate", 422, listingId=listing["id"], stars=6, adaptationEffort=1
    )


def test_stars_belong_to_the_starrer(as_owner, as_outsider, as_third):
    listing = publish_package(as_owner)
    as_outsider.call("communityStar", listingId=listing["id"])
    as_outsider.call("communityStar", listingId=listing["id"])  # idempotent
    assert [x["listingId"] for x in as_outsider.call("communityStarredList")["listings"]] == [
        listing["id"]
    ]
    assert as_third.call("communityStarredList")["listings"] == []
    # cy unstarring does not touch ben's star.
    as_third.call("communityUnstar", listingId=listing["id"])
    assert CommunityStar.objects.filter(listing_id=listing["id"]).count() == 1
    assert as_third.call("communityGet", listingId=listing["id"])["listing"]["starCount"] == 1
    as_outsider.call("communityUnstar", listingId=listing["id"])
    assert as_outsider.call("communityStarredList")["listings"] == []
    assert as_outsider.error("communityStar", 404, listingId="missing")


def test_the_timeline_shows_followed_users_listings_newest_first(as_owner, as_outsider, as_third):
    as_outsider.call("communityFollow", username="ada")
    first = publish_package(as_owner, name="one")
    publish_package(as_third, name="other")  # cy is not followed
    second = publish_package(as_owner, name="two")
    events = as_outsider.call("communityTimeline")["events"]
    assert [(e["type"], e["listing"]["listingId"]) for e in events] == [
        ("listing_published", second["id"]),
        ("listing_published", first["id"]),
    ]
    assert {e["actor"] for e in events} == {"ada"}
    page = as_outsider.call("communityTimeline", limit=1)
    rest = as_outsider.call("communityTimeline", limit=1, cursor=page["nextCursor"])
    assert [e["id"] for e in page["events"] + rest["events"]] == [e["id"] for e in events]
    assert as_third.call("communityTimeline")["events"] == []

    as_owner.call("communityUnpublish", listingId=second["id"])
    assert [e["listing"]["listingId"] for e in as_outsider.call("communityTimeline")["events"]] == [
        first["id"]
    ]
    as_outsider.call("communityUnfollow", username="ada")
    assert as_outsider.call("communityTimeline")["events"] == []
    assert as_owner.error("communityFollow", 422, username="ada")["code"] == "self_follow"
    assert as_owner.error("communityFollow", 404, username="nobody-here")


def test_profiles_count_followers_and_a_private_profile_hides_listings(
    as_owner, as_outsider, as_third
):
    listing = publish_package(as_owner)
    as_outsider.call("communityFollow", username="ada")
    as_third.call("communityFollow", username="ada")
    profile = as_third.call("communityProfileGet", username="ada")["profile"]
    assert (profile["followers"], profile["following"]) == (2, 0)
    assert [x["listingId"] for x in profile["listings"]] == [listing["id"]]

    updated = as_owner.call(
        "communityProfileUpdate", displayName="Ada L.", bio="Builds things", visibility="private"
    )["profile"]
    assert (updated["displayName"], updated["visibility"]) == ("Ada L.", "private")
    assert updated["listings"]  # the owner still sees her own
    hidden = as_third.call("communityProfileGet", username="ada")["profile"]
    assert (
        hidden["listings"] == [] and hidden["listingsHidden"] and hidden["bio"] == "Builds things"
    )
    # The listing itself stays public.
    found = as_third.call("communitySearch", query="greeter")["results"]
    assert [x["listingId"] for x in found] == [listing["id"]]
    # Nobody edits another's profile: the update always names the caller.
    as_third.call("communityProfileUpdate", bio="cy's bio")
    assert as_third.call("communityProfileGet", username="ada")["profile"]["bio"] == "Builds things"
    assert UserFollow.objects.count() == 2
