"""/account/connections: one-step setup for an MCP client, and the agents a person let in."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from apps.accounts.models import OAuthGrant, User
from apps.accounts.oauth import grants
from tests.accounts.factories import OAuthAccessTokenFactory, OAuthGrantFactory

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def test_the_page_gives_ready_to_paste_setup(owner_client: Client, settings: object) -> None:
    settings.SITE_URL = "https://kody.example"  # type: ignore[attr-defined]
    page = owner_client.get("/account/connections").content.decode()

    assert 'data-testid="mcp-url">https://kody.example/mcp<' in page
    assert "claude mcp add --transport http kody https://kody.example/mcp" in page
    assert "sign-in page" in page
    cursor = page.split('data-testid="setup-cursor">')[1].split("</code>")[0]
    assert json.loads(cursor.replace("&quot;", '"')) == {
        "mcpServers": {"kody": {"url": "https://kody.example/mcp"}}
    }
    assert 'data-copy="setup-vscode"' in page and "kody-copy.js" in page


def test_connected_agents_are_listed_with_scopes_and_use(owner: User, owner_client: Client) -> None:
    grant = OAuthGrantFactory(user=owner, client_name="Claude Code", scopes=["account", "jobs"])
    grants.record_use(OAuthAccessTokenFactory(grant=grant))
    page = owner_client.get("/account/connections").content.decode()
    assert "Claude Code" in page
    assert "<code>account</code>, <code>jobs</code>" in page
    assert "Not yet" not in page  # first and last use are shown


def test_the_oauth_token_rows_stay_out_of_the_pat_table(owner: User, owner_client: Client) -> None:
    OAuthAccessTokenFactory(grant=OAuthGrantFactory(user=owner, client_name="Cursor"))
    page = owner_client.get("/account/connections").content.decode()
    assert "You have no access tokens yet" in page


def test_revoke_disconnects_the_agent(owner: User, owner_client: Client) -> None:
    grant = OAuthGrantFactory(user=owner, client_name="Cursor")
    response = owner_client.post(f"/account/connections/agents/{grant.pk}/revoke")
    assert response.status_code == 302 and response.url == "/account/connections"
    grant.refresh_from_db()
    assert grant.revoked_at is not None
    assert "No agent is connected" in owner_client.get("/account/connections").content.decode()


def test_outsider_neither_sees_nor_revokes_the_owners_agents(
    owner: User, outsider_client: Client
) -> None:
    grant = OAuthGrantFactory(user=owner, client_name="Owner Secret Agent")
    page = outsider_client.get("/account/connections").content.decode()
    assert "Owner Secret Agent" not in page
    response = outsider_client.post(f"/account/connections/agents/{grant.pk}/revoke")
    assert response.status_code == 404
    assert OAuthGrant.objects.get(pk=grant.pk).revoked_at is None
