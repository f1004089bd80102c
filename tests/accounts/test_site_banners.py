"""Site banners render on the account UI for their audience, schedule and pages, and stay
dismissed: forever for a signed-in person, by cookie for a signed-out visitor."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from apps.accounts.models import SiteBannerDismissal
from apps.accounts.services import banners
from tests.accounts import factories as f

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def banner(title: str, **fields):  # type: ignore[no-untyped-def]
    return f.SiteBannerFactory(title=title, **{"enabled": True, **fields})


def test_a_signed_in_person_sees_enabled_scheduled_banners_by_priority(owner_client):
    banner("Low news", priority=1, severity="info")
    banner("Big warning", priority=900, severity="warning", body="Read this")
    banner("Switched off", enabled=False)
    banner("Not yet", starts_at=timezone.now() + timedelta(hours=1))
    banner("Over", ends_at=timezone.now() - timedelta(minutes=1))
    page = owner_client.get("/account").content.decode()
    assert page.index("Big warning") < page.index("Low news")
    assert "site-banner--warning" in page and "Read this" in page
    for hidden in ("Switched off", "Not yet", "Over"):
        assert hidden not in page


def test_audience_and_page_targeting(owner, owner_client, outsider_client):
    banner("For signed-out", audience="logged_out")
    banner("For owner only", audience="users", audience_user_ids=[owner.stable_user_id])
    banner("For pro plans", audience="plans", audience_plans=["pro"])
    banner("Usage page only", page_targeting="routes", route_patterns=["/account/usage*"])
    owner_home = owner_client.get("/account").content.decode()
    assert "For owner only" in owner_home
    assert "For signed-out" not in owner_home and "For pro plans" not in owner_home
    assert "Usage page only" not in owner_home
    assert "Usage page only" in owner_client.get("/account/usage").content.decode()
    # Another person is not in the owner's audience.
    assert "For owner only" not in outsider_client.get("/account").content.decode()
    anonymous = Client().get("/login").content.decode()
    assert "For signed-out" in anonymous and "For owner only" not in anonymous
    owner.plan = "pro"
    owner.save()
    assert "For pro plans" in owner_client.get("/account").content.decode()


def test_a_signed_in_dismissal_is_kept_for_that_person_only(
    frozen_clock, owner, outsider, owner_client, outsider_client
):
    shown = banner("Dismiss me")
    response = owner_client.post(f"/account/banners/{shown.pk}/dismiss", {"next": "/account/usage"})
    assert response.status_code == 302 and response["Location"] == "/account/usage"
    assert SiteBannerDismissal.objects.filter(banner=shown, user=owner).count() == 1
    owner_client.post(f"/account/banners/{shown.pk}/dismiss")  # twice is still one row
    assert SiteBannerDismissal.objects.filter(banner=shown).count() == 1
    frozen_clock.shift(timedelta(days=365 * 3))
    owner_client.force_login(owner)
    assert "Dismiss me" not in owner_client.get("/account").content.decode()
    outsider_client.force_login(outsider)
    assert "Dismiss me" in outsider_client.get("/account").content.decode()


def test_a_signed_out_dismissal_is_a_cookie(db):
    shown = banner("Cookie banner")
    visitor = Client()
    assert "Cookie banner" in visitor.get("/login").content.decode()
    response = visitor.post(f"/account/banners/{shown.pk}/dismiss", {"next": "https://evil.test/"})
    assert response["Location"] == "/"  # never an open redirect
    assert shown.pk in response.cookies[banners.COOKIE].value
    assert "Cookie banner" not in visitor.get("/login").content.decode()
    assert not SiteBannerDismissal.objects.exists()
    assert "Cookie banner" in Client().get("/login").content.decode()


def test_undismissible_or_unknown_banners_refuse_dismissal(owner_client):
    sticky = banner("Sticky", dismissible=False)
    assert owner_client.post(f"/account/banners/{sticky.pk}/dismiss").status_code == 404
    assert owner_client.post("/account/banners/nope/dismiss").status_code == 404
    assert "Sticky" in owner_client.get("/account").content.decode()
    assert not SiteBannerDismissal.objects.exists()


def test_a_hostile_cookie_is_ignored():
    assert banners.cookie_ids("a.b<script>.c") == ["a", "c"]
    assert len(banners.cookie_ids(".".join(f"id{n}" for n in range(500)))) == banners.COOKIE_MAX_IDS
