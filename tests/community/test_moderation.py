"""Moderation: reports (rate-limited), triage and bans in the admin with audit events, and the
operators' trust, featuring and content-free activity list."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.accounts.models import AuditEvent
from apps.community.models import CommunityBan, CommunityListing, CommunityReport
from apps.community.services import moderation
from tests.community.conftest import publish_package

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def test_a_report_is_recorded_and_rate_limited_per_reporter(as_owner, as_outsider, as_third):
    listing = publish_package(as_owner)
    made = as_outsider.call("communityReport", listingId=listing["id"], reason="spam")["report"]
    row = CommunityReport.objects.get(id=made["id"])
    assert (row.status, row.listing_name, row.reason) == ("open", "greeter", "spam")
    for _ in range(moderation.REPORTS_PER_HOUR - 1):
        as_outsider.call("communityReport", listingId=listing["id"], reason="spam")
    limited = as_outsider.error("communityReport", 429, listingId=listing["id"], reason="spam")
    assert limited["code"] == "report_rate_limited"
    # The limit is ben's alone.
    as_third.call("communityReport", listingId=listing["id"], reason="broken")
    assert CommunityReport.objects.count() == moderation.REPORTS_PER_HOUR + 1


def test_operators_triage_reports_and_ban_in_the_admin(
    as_owner, as_outsider, operator, owner, operator_client
):
    listing = publish_package(as_owner)
    made = as_outsider.call("communityReport", listingId=listing["id"], reason="malware")["report"]
    url = reverse("admin:community_communityreport_change", args=[made["id"]])
    response = operator_client.post(url, {"status": "resolved", "resolution_note": "delisted it"})
    assert response.status_code == 302, response.content[:2000]
    row = CommunityReport.objects.get(id=made["id"])
    assert (row.status, row.resolution_note) == ("resolved", "delisted it")
    assert row.resolved_by_user_id == operator.stable_user_id and row.resolved_at
    assert AuditEvent.objects.using("audit").filter(action="community_report_resolved").exists()

    add = reverse("admin:community_communityban_add")
    response = operator_client.post(add, {"user_id": owner.stable_user_id, "reason": "malware"})
    assert response.status_code == 302, response.content[:2000]
    ban = CommunityBan.objects.get(user_id=owner.stable_user_id)
    assert ban.banned_by_user_id == operator.stable_user_id
    assert AuditEvent.objects.using("audit").filter(action="community_ban").exists()
    assert as_outsider.call("communitySearch", query="greeter")["results"] == []


def test_trust_and_featuring_are_for_operators_only(as_owner, as_outsider, as_operator, operator):
    listing = publish_package(as_owner)
    for agent in (as_owner, as_outsider):
        agent.error(
            "communitySetTrusted", 403, listingId=listing["id"], commit=listing["pinnedCommit"]
        )
        agent.error("communitySetFeatured", 403, listingId=listing["id"], featured=True)
        agent.error("adminCommunityActivityList", 403)
    row = CommunityListing.objects.get(id=listing["id"])
    assert row.trusted_commit is None and row.featured_at is None

    assert as_operator.error("communitySetTrusted", 422, listingId=listing["id"], commit="abc")
    trusted = as_operator.call(
        "communitySetTrusted", listingId=listing["id"], commit=listing["pinnedCommit"]
    )["listing"]
    assert trusted["trustedCommit"] == listing["pinnedCommit"]
    as_operator.call("communitySetFeatured", listingId=listing["id"], featured=True)
    row.refresh_from_db()
    assert row.trusted_by_user_id == operator.stable_user_id and row.featured_at is not None
    hit = as_outsider.call("communitySearch", query="greeter")["results"][0]
    assert hit["trusted"] and hit["featured"]


def test_the_activity_list_carries_no_content(
    as_owner, as_outsider, as_third, as_operator, outsider
):
    listing = publish_package(as_owner)
    as_outsider.call("communityFork", listingId=listing["id"])
    as_third.call(
        "communityRate", listingId=listing["id"], stars=3, adaptationEffort=2, note="SECRET NOTE"
    )
    events = as_operator.call("adminCommunityActivityList")["events"]
    assert [(e["type"], e["actor"]) for e in events] == [("rating", "cy"), ("fork", "ben")]
    assert all(e["listingKodyId"] == "@ada/greeter" for e in events)
    text = str(events)
    assert "SECRET NOTE" not in text and outsider.stable_user_id not in text
    assert outsider.email not in text and "greet(" not in text


def test_an_operators_hard_delete_removes_everything_but_forks(
    as_owner, as_outsider, operator_client
):
    from apps.community.models import CommunityFork, CommunityRating
    from apps.community.services import icons
    from kody.blobs.buckets import list_prefix
    from kody.kv import keys as kv_keys
    from kody.kv import store as kv

    listing = publish_package(as_owner)
    fork = as_outsider.call("communityFork", listingId=listing["id"])["fork"]
    as_outsider.call("communityRate", listingId=listing["id"], stars=2, adaptationEffort=3)
    url = reverse("admin:community_communitylisting_delete", args=[listing["id"]])
    assert operator_client.post(url, {"post": "yes"}).status_code == 302
    assert not CommunityListing.objects.filter(id=listing["id"]).exists()
    assert not CommunityRating.objects.filter(listing_id=listing["id"]).exists()
    assert kv.get(kv_keys.community_snapshot(listing["id"])) is None
    assert list(list_prefix(icons.BUCKET, f"community-icon:v3/{listing['id']}/")) == []
    assert CommunityFork.objects.filter(id=fork["id"]).exists()
