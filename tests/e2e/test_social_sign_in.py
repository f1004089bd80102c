"""In Chromium: a person signs up with GitHub (the local provider fake), lands on their account,
sees the connection, and cannot unlink it while it is their only way in."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apps.accounts.models import OAuthConnection, User
from tests.accounts.social.support import CLIENT_ID, CLIENT_SECRET, provider_settings
from tests.fakes.oauth_provider import OAuthProviderFake

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True, databases=["default", "audit"]),
]
RUN = uuid.uuid4().hex[:8]


@pytest.fixture
def github(site: str, settings: Any) -> Iterator[OAuthProviderFake]:
    with OAuthProviderFake() as provider:
        provider.add_client(CLIENT_ID, CLIENT_SECRET)
        provider.user = {
            "id": int(RUN, 16),
            "login": f"octo-{RUN}",
            "name": "Octo Browser",
            "email": f"octo.{RUN}@example.com",
            "email_verified": True,
        }
        settings.KODY_FETCH_ALLOW_LOOPBACK = True
        settings.KODY_SOCIAL_PROVIDERS = {"github": provider_settings(provider)["github"]}
        yield provider


def test_sign_up_with_github_and_keep_the_last_way_in(
    browser: Any, site: str, github: OAuthProviderFake, artifacts: Path
) -> None:
    from playwright.sync_api import expect

    page = browser.new_context().new_page()
    page.goto(f"{site}/login")
    page.get_by_role("link", name="Continue with GitHub").click()
    expect(page.get_by_role("heading", name="Your account")).to_be_visible()
    user = User.objects.get(email=f"octo.{RUN}@example.com")
    assert user.username == f"octo-{RUN}" and user.email_verified_at is not None

    page.goto(f"{site}/account/connections")
    table = page.get_by_test_id("social-connections")
    expect(table.get_by_role("rowheader", name="GitHub")).to_be_visible()
    expect(table.get_by_role("cell", name="Octo Browser", exact=True)).to_be_visible()
    page.screenshot(path=str(artifacts / "e2e-social-connections.png"), full_page=True)

    table.get_by_role("button", name="Unlink GitHub Octo Browser").click()
    expect(page.get_by_text("This is the only way left to sign in")).to_be_visible()
    assert OAuthConnection.objects.filter(user=user).count() == 1
