"""The database itself refuses rows that break the community tables' stated constraints."""

from __future__ import annotations

import pytest

from apps.community import models as c
from tests.rows import ALICE, BOB, make

pytestmark = pytest.mark.django_db


def test_every_community_table_accepts_a_valid_row():
    for model in (
        c.CommunityListing,
        c.CommunityRating,
        c.CommunityReport,
        c.CommunityBan,
        c.CommunityStar,
        c.CommunityActivityEvent,
        c.CommunityFork,
        c.UserFollow,
    ):
        make(model)
        assert model.objects.count() == 1, model.__name__


def test_listing_category_is_a_closed_set(refused):
    for category in c.ListingCategory.values:
        make(
            c.CommunityListing,
            category=category,
            package_id=f"pkg-{category}",
            kody_id=f"@alice/{category}",
        )
    refused(lambda: make(c.CommunityListing, category="games"))


def test_listing_status_is_a_closed_set(refused):
    refused(lambda: make(c.CommunityListing, status="hidden"))


def test_one_listing_per_owner_package(refused):
    make(c.CommunityListing)
    refused(lambda: make(c.CommunityListing, kody_id="@alice/other"))
    make(c.CommunityListing, owner_user_id=BOB)


def test_only_one_active_listing_per_owner_kody_id(refused):
    make(c.CommunityListing, status="delisted")
    make(c.CommunityListing, package_id="pkg-2", status="delisted")
    make(c.CommunityListing, package_id="pkg-3")
    refused(lambda: make(c.CommunityListing, package_id="pkg-4"))


def test_rating_stars_and_effort_are_one_to_five(refused):
    refused(lambda: make(c.CommunityRating, stars=0))
    refused(lambda: make(c.CommunityRating, stars=6))
    refused(lambda: make(c.CommunityRating, adaptation_effort=0))
    refused(lambda: make(c.CommunityRating, adaptation_effort=6))
    make(c.CommunityRating, stars=1, adaptation_effort=5)


def test_one_rating_per_listing_and_user(refused):
    make(c.CommunityRating)
    refused(lambda: make(c.CommunityRating, stars=3))
    make(c.CommunityRating, user_id=ALICE)


def test_report_status_is_a_closed_set(refused):
    refused(lambda: make(c.CommunityReport, status="ignored"))


def test_one_star_per_listing_and_user(refused):
    make(c.CommunityStar)
    refused(lambda: make(c.CommunityStar))


def test_activity_event_type_is_a_closed_set(refused):
    refused(lambda: make(c.CommunityActivityEvent, event_type="listing_forked"))


def test_fork_actor_is_human_or_agent(refused):
    refused(lambda: make(c.CommunityFork, actor="bot"))


def test_ban_is_one_row_per_user(refused):
    make(c.CommunityBan)
    refused(lambda: make(c.CommunityBan))


def test_follows_are_unique(refused):
    make(c.UserFollow)
    make(c.UserFollow, follower_user_id=ALICE, followee_user_id=BOB)
    refused(lambda: make(c.UserFollow))
