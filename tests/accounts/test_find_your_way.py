"""A person can find their way: every account page is in the menu, and the front page says what
Kody is and how an agent connects."""

from __future__ import annotations

import re

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def test_the_menu_links_every_account_page(owner_client: Client) -> None:
    page = owner_client.get("/account").content.decode()
    nav = page.split('aria-label="Main"')[1].split("</nav>")[0]
    links = set(re.findall(r'href="([^"]+)"', nav))
    assert {
        "/account",
        "/account/connections",
        "/account/usage",
        "/account/email",
        "/account/memories",
        "/account/secrets",
        "/account/settings",
    } <= links
    for path in ("/account/email", "/account/memories", "/account/secrets"):
        assert owner_client.get(path).status_code == 200


def test_the_front_page_explains_and_shows_the_mcp_url(client: Client, settings: object) -> None:
    settings.SITE_URL = "https://kody.example"  # type: ignore[attr-defined]
    page = client.get("/").content.decode()
    assert "<title>Kody — a home for your AI agents' work</title>" in page
    assert "Kody · Kody" not in page
    assert 'data-testid="front-mcp-url">https://kody.example/mcp<' in page
    assert 'href="/signup"' in page
    assert "claude mcp add --transport http kody https://kody.example/mcp" in page


def test_other_pages_keep_their_own_title(owner_client: Client) -> None:
    page = owner_client.get("/account/connections").content.decode()
    assert "<title>Connections · Kody</title>" in page


def test_account_home_shows_the_connected_agents_and_links_every_area(
    owner_client: Client,
) -> None:
    from apps.accounts.models import User
    from tests.accounts.factories import OAuthGrantFactory

    owner = User.objects.get(username="ada")
    page = owner_client.get("/account").content.decode()
    assert "No agent is connected yet" in page
    OAuthGrantFactory(user=owner, client_name="Claude Code")
    page = owner_client.get("/account").content.decode()
    agents = page.split('data-testid="summary-agents"')[1].split("</ul>")[0]
    assert '<span class="count">1</span>' in agents and "<li>Claude Code</li>" in agents
    main = page.split('id="main"')[1]
    for path in ("/account/email", "/account/memories", "/account/secrets", "/account/jobs"):
        assert f'href="{path}"' in main
