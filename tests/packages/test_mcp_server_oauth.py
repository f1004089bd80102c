"""A remote MCP server that asks for OAuth (a protected resource whose authorization server is
the local OAuth provider fake): added as auth_required, authorized by the person through the
account pages (discovery, dynamic registration, PKCE, the callback), then listed and called
with the stored token. No token value reaches a reply, a page or an export; another person's
callback link is not found."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from django.db import connection

from apps.accounts.export import service as export
from apps.packages.models import McpServerSetting
from apps.packages.services import mcp_servers
from tests.fakes.mcp_server import McpServerFake
from tests.fakes.oauth_provider import OAuthProviderFake

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


@pytest.fixture
def provider(settings):
    settings.KODY_FETCH_ALLOW_LOOPBACK = True
    with OAuthProviderFake() as fake:
        yield fake


@pytest.fixture
def protected(provider):
    with McpServerFake(oauth=provider) as fake:
        yield fake


def consent(authorize_url: str) -> dict[str, str]:
    """What the person's browser does at the provider: the code and state it brings back."""
    answer = httpx2.get(authorize_url, follow_redirects=False)
    assert answer.status_code in (302, 303), answer.text
    back = urlsplit(answer.headers["location"])
    assert back.path == "/account/mcp-servers/oauth/callback"
    return {k: v[0] for k, v in parse_qs(back.query).items()}


def authorized(owner_client, as_owner, protected) -> tuple[str, dict[str, str]]:  # type: ignore[no-untyped-def]
    server = as_owner.call("mcpServerAdd", name="locked", url=protected.url)["server"]
    assert server["status"] == "auth_required"
    assert server["authorizePage"].endswith(f"/account/mcp-servers/{server['id']}")
    started = owner_client.post(f"/account/mcp-servers/{server['id']}", {"action": "authorize"})
    assert started.status_code == 302
    assert started["Location"].startswith(protected.oauth.url("/authorize"))
    query = parse_qs(urlsplit(started["Location"]).query)
    assert query["code_challenge_method"] == ["S256"] and query["resource"] == [protected.url]
    return server["id"], consent(started["Location"])


def test_authorizing_lets_kody_list_and_call_the_tools(owner_client, as_owner, owner, protected):
    server_id, back = authorized(owner_client, as_owner, protected)
    done = owner_client.get("/account/mcp-servers/oauth/callback", back)
    assert done.status_code == 302 and done["Location"] == f"/account/mcp-servers/{server_id}"
    [server] = as_owner.call("mcpServerList")["servers"]
    assert server["status"] == "connected" and server["toolCount"] == 2
    reply = as_owner.call(
        "mcpServerCallTool", serverId=server_id, tool="add", arguments={"a": 20, "b": 22}
    )
    assert reply["structuredContent"] == {"result": 42}
    [token] = list(protected.oauth.access_tokens)
    assert f"Bearer {token}" in protected.authorizations
    # The token is nowhere the person or an agent can read it.
    page = owner_client.get(f"/account/mcp-servers/{server_id}").content.decode()
    listed = json.dumps(as_owner.call("mcpServerList"))
    exported = json.dumps(
        [
            export.manifest(owner),
            export.section(owner, "d1_table", table="mcp_server_settings"),
        ],
        default=str,
    )
    refresh = [t for t in protected.oauth.refresh_tokens]
    for secret in [token, *refresh]:
        assert secret not in page and secret not in listed and secret not in exported
        assert secret not in json.dumps(reply)


def test_a_callback_with_a_state_that_is_not_theirs_is_not_found(
    owner_client, outsider_client, as_owner, protected
):
    server_id, back = authorized(owner_client, as_owner, protected)
    stolen = outsider_client.get("/account/mcp-servers/oauth/callback", back)
    assert stolen.status_code == 404
    assert protected.oauth.token_requests == []
    forged = owner_client.get("/account/mcp-servers/oauth/callback", {**back, "state": "made-up"})
    assert forged.status_code == 404
    assert McpServerSetting.objects.get(id=server_id).enabled is True
    # The right person with the right state still finishes it.
    assert owner_client.get("/account/mcp-servers/oauth/callback", back).status_code == 302


def test_a_denied_authorization_stores_nothing(owner_client, as_owner, protected):
    protected.oauth.deny = True
    server_id, back = authorized(owner_client, as_owner, protected)
    assert "error" in back
    answer = owner_client.get("/account/mcp-servers/oauth/callback", back)
    assert answer.status_code == 404
    [server] = as_owner.call("mcpServerList")["servers"]
    assert server["status"] == "auth_required"
    assert protected.oauth.access_tokens == {}


def test_an_expired_token_is_refreshed_once_and_the_new_one_kept(
    frozen_clock, owner_client, as_owner, provider, protected
):
    provider.access_token_ttl = 60
    server_id, back = authorized(owner_client, as_owner, protected)
    owner_client.get("/account/mcp-servers/oauth/callback", back)
    [first] = list(provider.access_tokens)
    provider.access_tokens.clear()  # the provider forgets it: only a refreshed token works now
    frozen_clock.shift(120)
    reply = as_owner.call(
        "mcpServerCallTool", serverId=server_id, tool="shout", arguments={"text": "ok"}
    )
    assert reply["structuredContent"] == {"result": "OK"}
    assert sum(provider.refresh_uses.values()) == 1
    [second] = list(provider.access_tokens)
    assert second != first
    # The rotated pair was stored: the next call uses it without another refresh.
    as_owner.call("mcpServerCallTool", serverId=server_id, tool="shout", arguments={"text": "a"})
    assert sum(provider.refresh_uses.values()) == 1
    assert protected.authorizations[-1] == f"Bearer {second}"


@pytest.mark.django_db(transaction=True, databases=["default", "audit"])
def test_eight_concurrent_callers_refresh_the_token_once(
    frozen_clock, owner_client, as_owner, owner, provider, protected
):
    provider.access_token_ttl = 60
    server_id, back = authorized(owner_client, as_owner, protected)
    owner_client.get("/account/mcp-servers/oauth/callback", back)
    provider.access_tokens.clear()
    frozen_clock.shift(120)

    def one(n: int) -> dict[str, Any]:
        try:
            return mcp_servers.call_tool(owner.stable_user_id, server_id, "add", {"a": n, "b": 1})
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=8) as pool:
        replies = list(pool.map(one, range(8)))
    assert [r["structuredContent"]["result"] for r in replies] == [n + 1 for n in range(8)]
    assert sum(provider.refresh_uses.values()) == 1
    assert len(provider.access_tokens) == 1


def test_a_refused_live_token_is_refreshed_once_and_the_call_retried(
    owner_client, as_owner, provider, protected
):
    server_id, back = authorized(owner_client, as_owner, protected)
    owner_client.get("/account/mcp-servers/oauth/callback", back)
    [first] = list(provider.access_tokens)
    # Revoked at the provider long before its stated expiry: the server answers 401.
    provider.access_tokens.clear()
    reply = as_owner.call(
        "mcpServerCallTool", serverId=server_id, tool="add", arguments={"a": 1, "b": 2}
    )
    assert reply["structuredContent"] == {"result": 3}
    assert sum(provider.refresh_uses.values()) == 1
    [second] = list(provider.access_tokens)
    assert second != first and protected.authorizations[-1] == f"Bearer {second}"
    # The refreshed token was kept: refresh/reconnect work without another refresh.
    assert as_owner.call("mcpServerRefresh", serverId=server_id)["server"]["status"] == "connected"
    assert sum(provider.refresh_uses.values()) == 1


def test_a_refused_token_that_cannot_be_refreshed_asks_for_authorization(
    owner_client, as_owner, provider, protected
):
    server_id, back = authorized(owner_client, as_owner, protected)
    owner_client.get("/account/mcp-servers/oauth/callback", back)
    provider.access_tokens.clear()
    provider.refresh_tokens.clear()  # the grant is gone at the provider
    error = as_owner.error(
        "mcpServerCallTool", 502, serverId=server_id, tool="add", arguments={"a": 1, "b": 2}
    )
    assert error["code"] == "mcp_server_auth_required"
    assert provider.access_tokens == {}
    refreshes = [r for r in provider.token_requests if r["grant_type"] == "refresh_token"]
    assert len(refreshes) == 1  # one refresh attempt, not a loop
    server = as_owner.call("mcpServerRefresh", serverId=server_id)["server"]
    assert server["status"] == "auth_required" and server["authorizePage"]
