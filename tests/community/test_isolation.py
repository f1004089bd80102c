"""Nobody acts on another person's listing, fork, stars or profile through any community
capability; each capability is named here with the test that covers it."""

from __future__ import annotations

import pytest

from apps.accounts.models import User
from apps.community.models import (
    CommunityFork,
    CommunityListing,
    CommunityRating,
    CommunityStar,
    UserFollow,
)
from kody.capabilities import all_capabilities
from tests.community.conftest import publish_package

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

# capability -> where its cross-user denial is tested
COVERED = {
    "communityPublish": "test_publish.test_another_user_can_neither_publish_nor_unpublish_it",
    "communityUnpublish": "test_publish.test_another_user_can_neither_publish_nor_unpublish_it",
    "communitySearch": "test_search.test_delisted_and_banned_owner_listings_never_show",
    "communityGet": "test_search.test_delisted_and_banned_owner_listings_never_show",
    "communityFork": "test_forks.test_nobody_else_adopts_a_fork_and_delisted_listings_...",
    "communityForkAdopt": "test_forks.test_nobody_else_adopts_a_fork_and_delisted_listings_...",
    "communityRate": "below",
    "communityStar": "test_social.test_stars_belong_to_the_starrer",
    "communityUnstar": "test_social.test_stars_belong_to_the_starrer",
    "communityStarredList": "test_social.test_stars_belong_to_the_starrer",
    "communityFollow": "below",
    "communityUnfollow": "below",
    "communityTimeline": "test_social.test_the_timeline_shows_followed_users_listings_...",
    "communityProfileGet": "test_social.test_profiles_count_followers_and_a_private_...",
    "communityProfileUpdate": "below",
    "communityReport": "test_moderation.test_a_report_is_recorded_and_rate_limited_...",
    "communitySetTrusted": "test_moderation.test_trust_and_featuring_are_for_operators_only",
    "communitySetFeatured": "test_moderation.test_trust_and_featuring_are_for_operators_only",
    "adminCommunityActivityList": "test_moderation.test_trust_and_featuring_are_for_...",
}


def test_every_community_capability_has_an_isolation_test():
    declared = {
        c.name for c in all_capabilities() if c.handler.__module__.startswith("apps.community.")
    }
    assert declared == set(COVERED)


def test_no_argument_lets_one_user_write_another_users_rows(
    as_owner, as_outsider, as_third, owner: User, outsider: User
):
    listing = publish_package(as_owner)
    as_outsider.call("communityRate", listingId=listing["id"], stars=5, adaptationEffort=1)
    as_outsider.call("communityFollow", username="ada")
    as_outsider.call("communityStar", listingId=listing["id"])
    fork = as_outsider.call("communityFork", listingId=listing["id"])["fork"]

    # Extra arguments naming someone else are refused, not honoured.
    assert as_third.error(
        "communityRate",
        422,
        listingId=listing["id"],
        stars=1,
        adaptationEffort=5,
        userId=outsider.stable_user_id,
    )
    assert as_third.error("communityProfileUpdate", 422, bio="x", username="ada")
    # cy's own rating and unfollow touch only cy's rows.
    as_third.call("communityRate", listingId=listing["id"], stars=1, adaptationEffort=5)
    as_third.call("communityUnfollow", username="ada")
    as_third.call("communityUnstar", listingId=listing["id"])
    assert CommunityRating.objects.get(user_id=outsider.stable_user_id).stars == 5
    assert UserFollow.objects.filter(follower_user_id=outsider.stable_user_id).count() == 1
    assert CommunityStar.objects.filter(user_id=outsider.stable_user_id).count() == 1
    # The owner cannot take over the fork made from her listing, nor rate herself.
    assert as_owner.error("communityForkAdopt", 404, forkId=fork["id"])
    assert CommunityFork.objects.get(id=fork["id"]).forker_user_id == outsider.stable_user_id
    assert as_owner.error(
        "communityRate", 403, listingId=listing["id"], stars=5, adaptationEffort=1
    )
    assert as_third.error("communityUnpublish", 404, listingId=listing["id"])
    assert CommunityListing.objects.get(id=listing["id"]).status == "active"
    assert owner.display_name == User.objects.get(pk=owner.pk).display_name
