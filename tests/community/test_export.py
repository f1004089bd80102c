"""Export carries every community row of the user (their listings, and their ratings, stars,
forks, follows and reports on other people's listings) and their listing icons — and none of
another user's."""

from __future__ import annotations

import pytest

from apps.accounts.export import service
from tests.community.conftest import publish_package

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def rows(user, table: str) -> list[dict]:  # type: ignore[no-untyped-def]
    out, cursor = [], None
    while True:
        page = service.section(user, "d1_table", table=table, cursor=cursor, limit=100)
        out += page["rows"]
        cursor = page["nextCursor"]
        if cursor is None:
            return out


def test_export_carries_the_users_community_rows_only(as_owner, as_outsider, owner, outsider):
    mine = publish_package(as_owner)
    theirs = publish_package(as_outsider, name="notes", description="Take notes.")
    as_owner.call("communityRate", listingId=theirs["id"], stars=5, adaptationEffort=1)
    as_owner.call("communityStar", listingId=theirs["id"])
    as_owner.call("communityFollow", username="ben")
    fork = as_owner.call("communityFork", listingId=theirs["id"])["fork"]
    as_owner.call("communityReport", listingId=theirs["id"], reason="dup")
    as_outsider.call("communityRate", listingId=mine["id"], stars=1, adaptationEffort=5)

    assert [r["id"] for r in rows(owner, "community_listings")] == [mine["id"]]
    assert [(r["listing_id"], r["stars"]) for r in rows(owner, "community_ratings")] == [
        (theirs["id"], 5)
    ]
    assert [r["listing_id"] for r in rows(owner, "community_stars")] == [theirs["id"]]
    assert [r["id"] for r in rows(owner, "community_forks")] == [fork["id"]]
    assert [r["reason"] for r in rows(owner, "community_reports")] == ["dup"]
    assert len(rows(owner, "user_follows")) == 1
    events = rows(owner, "community_activity_events")
    assert {e["listing_id"] for e in events} == {mine["id"]}

    # ben's export holds his listing and his rating on ada's, nothing of ada's rows.
    assert [r["id"] for r in rows(outsider, "community_listings")] == [theirs["id"]]
    assert [r["listing_id"] for r in rows(outsider, "community_ratings")] == [mine["id"]]
    assert rows(outsider, "community_stars") == [] and rows(outsider, "community_forks") == []
