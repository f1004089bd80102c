"""Starting a social sign-in (``/auth/<provider>``) is bounded per client address and per
session: past the budget the start is a coded 429 and nothing is sent to the provider."""

from __future__ import annotations

import secrets

import pytest
from django.test import Client

from tests.fakes.oauth_provider import OAuthProviderFake

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def fresh_address() -> str:
    # A documentation address of its own per test, so no budget is shared with another test.
    return f"2001:db8::{secrets.token_hex(2)}:{secrets.token_hex(2)}"


def test_starts_from_one_address_are_limited(fake: OAuthProviderFake, settings):
    settings.KODY_SOCIAL_START_PER_IP = 3
    settings.KODY_SOCIAL_START_PER_SESSION = 100
    address = fresh_address()
    # A new browser (a new session) each time: the address budget still applies.
    for _ in range(3):
        assert Client(REMOTE_ADDR=address).get("/auth/github").status_code == 302
    refused = Client(REMOTE_ADDR=address).get("/auth/github")
    assert refused.status_code == 429 and refused["Retry-After"]
    assert b"rate_limited" in refused.content
    assert fake.url("/authorize") not in refused.get("Location", "")
    # Another address is not affected.
    assert Client(REMOTE_ADDR=fresh_address()).get("/auth/github").status_code == 302


def test_starts_from_one_session_are_limited(fake: OAuthProviderFake, settings):
    settings.KODY_SOCIAL_START_PER_IP = 100
    settings.KODY_SOCIAL_START_PER_SESSION = 2
    browser = Client(REMOTE_ADDR=fresh_address())
    # The first start opens the session; the session budget counts from the next one.
    statuses = [browser.get("/auth/github").status_code for _ in range(4)]
    assert statuses[:3] == [302, 302, 302] and statuses[3] == 429
    assert browser.get("/auth/google").status_code == 429  # the budget is not per provider


def test_linking_from_the_connections_page_is_limited_too(fake: OAuthProviderFake, owner, settings):
    settings.KODY_SOCIAL_START_PER_IP = 2
    settings.KODY_SOCIAL_START_PER_SESSION = 100
    browser = Client(REMOTE_ADDR=fresh_address())
    browser.force_login(owner)
    assert [browser.post("/auth/github").status_code for _ in range(3)] == [302, 302, 429]
