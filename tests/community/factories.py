"""factory_boy factories for the community app: one valid row per model."""

from __future__ import annotations

import factory
from factory.django import DjangoModelFactory

from apps.community import models as c
from tests.rows import ALICE, BOB, registers


def _factory(model, **fields):  # type: ignore[no-untyped-def]
    return registers(factory.make_factory(model, FACTORY_CLASS=DjangoModelFactory, **fields))


CommunityListingFactory = _factory(
    c.CommunityListing,
    owner_user_id=ALICE,
    package_id="pkg-1",
    source_id="src-1",
    kody_id="@alice/weather",
    name="weather",
    pinned_commit="c1",
    category="utilities",
)
CommunityRatingFactory = _factory(
    c.CommunityRating, listing_id="lst-1", user_id=BOB, stars=5, adaptation_effort=2
)
CommunityReportFactory = _factory(
    c.CommunityReport,
    listing_id="lst-1",
    listing_owner_user_id=ALICE,
    reporter_user_id=BOB,
    reason="spam",
)
CommunityBanFactory = _factory(c.CommunityBan, user_id=BOB, banned_by_user_id=ALICE, reason="spam")
CommunityStarFactory = _factory(c.CommunityStar, listing_id="lst-1", user_id=BOB)
CommunityActivityEventFactory = _factory(
    c.CommunityActivityEvent,
    actor_user_id=ALICE,
    event_type="listing_published",
    listing_id="lst-1",
)
CommunityForkFactory = _factory(
    c.CommunityFork,
    listing_id="lst-1",
    forker_user_id=BOB,
    origin_commit="c1",
    forked_package_id="pkg-2",
    forked_source_id="src-2",
    target_kody_id="@bob/weather",
    actor="agent",
)
UserFollowFactory = _factory(c.UserFollow, follower_user_id=BOB, followee_user_id=ALICE)
