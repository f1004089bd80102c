"""An MCP client connects the way MCP clients expect: the official SDK's OAuth provider, from a
cold start, against a live uvicorn serving config.asgi.

The SDK gets a 401 from ``/mcp``, follows ``resource_metadata`` to the protected-resource
metadata, finds the authorization server, registers (or presents a client ID metadata
document), opens the consent page — which the test, signed in over HTTP as a person would be,
answers — exchanges the code with PKCE, and calls tools; then refreshes. The refusals are driven
with plain HTTP against the same server.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx2
import mcp_types as types
import pytest
from django.conf import settings
from django.utils import timezone
from mcp.client.session import ClientSession
from oauth2_provider.models import AccessToken as ToolkitAccessToken
from oauth2_provider.models import Application, RefreshToken

from apps.accounts.models import AccessToken, OAuthGrant, TokenKind, User
from apps.accounts.oauth import grants
from tests.accounts import oauth_http as raw
from tests.accounts.oauth_live import (
    REDIRECT_URI,
    Consent,
    MemoryStorage,
    document_server,
    initialize,
    provider,
    self_signed,
    signed_in,
    with_mcp,
)
from tests.kernel.test_mcp_live import database_url, free_port, run_unwrapped, wait_until_up

pytestmark = pytest.mark.django_db(
    transaction=True,
    databases=["default", "audit"],
    available_apps=["apps.accounts", "oauth2_provider", "apps.packages"],
)

BASE_DIR = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def server_url(
    django_db_setup: None, tmp_path_factory: pytest.TempPathFactory, tls: tuple[Path, Path]
) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("uvicorn") / "server.log"
    env = {
        **os.environ,
        "DATABASE_URL": database_url("default"),
        "AUDIT_DATABASE_URL": database_url("audit"),
        "REDIS_URL": settings.REDIS_URL,
        "KODY_DB_CONN_MAX_AGE": "0",
        "KODY_SITE_URL": url,
        "KODY_ACTORS_INLINE": "1",
        # The test's own loopback https server plays the client's metadata host.
        "KODY_FETCH_ALLOW_LOOPBACK": "1",
        "KODY_FETCH_CA_FILE": str(tls[0]),
        # Every test registers a client from 127.0.0.1; the hourly cap is tested on its own.
        "KODY_OAUTH_REGISTRATIONS_PER_HOUR": "100000",
    }
    command = [
        sys.executable, "-m", "uvicorn", "config.asgi:application",
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
    ]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, cwd=BASE_DIR, env=env, stdout=out, stderr=out)
    try:
        wait_until_up(proc, url, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def _whoami(session: ClientSession) -> tuple[types.ListToolsResult, types.CallToolResult]:
    return await session.list_tools(), await session.call_tool("whoami", {})


def test_sdk_client_connects_from_a_cold_start_and_refreshes(server_url: str, owner: User) -> None:
    storage = MemoryStorage()

    async def run() -> tuple[Consent, Any, Any, str, str]:
        browser = await signed_in(server_url, owner.username)
        consent = Consent(browser)
        auth = provider(server_url, consent, storage)
        first = await with_mcp(server_url, auth, _whoami)
        first_token = storage.tokens.access_token
        # The access token runs out: the SDK refreshes on its own before the next call.
        auth.context.token_expiry_time = time.time() - 1
        second = await with_mcp(server_url, auth, _whoami)
        await browser.aclose()
        return consent, first, second, first_token, storage.tokens.access_token

    consent, (tools, whoami), (_, again), first_token, second_token = run_unwrapped(run)

    page = consent.pages[0]
    assert 'data-testid="client-name">Test Agent<' in page
    assert 'data-testid="redirect-host">127.0.0.1:53682<' in page
    assert "<code>account</code>" in page and "<code>email</code>" in page
    assert "resource=" in consent.authorize_urls[0]
    assert "whoami" in {tool.name for tool in tools.tools}
    assert whoami.structured_content["userId"] == owner.stable_user_id
    assert again.structured_content["userId"] == owner.stable_user_id
    assert first_token != second_token and first_token.startswith("kody_oat_")

    # The old access token went with its rotation; the new one is bound to this /mcp.
    assert initialize(server_url, first_token).status_code == 401
    row = AccessToken.objects.get(token_hash=hashlib.sha256(second_token.encode()).hexdigest())
    assert row.kind == TokenKind.OAUTH and row.user_id == owner.pk
    assert row.audience == [server_url + "/mcp"]
    assert row.expires_at <= timezone.now() + timedelta(hours=1, minutes=1)
    grant = OAuthGrant.objects.get(user=owner)
    assert grant.client_name == "Test Agent" and grant.first_used_at is not None
    owner.refresh_from_db()
    assert owner.mcp_client_name == "Test Agent"
    assert owner.first_mcp_connected_at is not None


def test_401_points_at_the_protected_resource_metadata(server_url: str) -> None:
    response = initialize(server_url, None)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    metadata_url = server_url + "/.well-known/oauth-protected-resource/mcp"
    assert f'resource_metadata="{metadata_url}"' in challenge
    metadata = httpx2.get(metadata_url).json()
    assert metadata["resource"] == server_url + "/mcp"
    assert metadata["authorization_servers"] == [server_url]
    server = httpx2.get(server_url + "/.well-known/oauth-authorization-server").json()
    assert server["issuer"] == server_url
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert server["response_types_supported"] == ["code"]
    assert server["client_id_metadata_document_supported"] is True
    assert server["registration_endpoint"] == server_url + "/oauth/register"
    assert server["revocation_endpoint"] == server_url + "/oauth/revoke"


def test_sdk_client_with_a_client_id_metadata_document(
    server_url: str, owner: User, tls: tuple[Path, Path]
) -> None:
    with document_server(*tls) as docs:
        client_id = docs.url + "/agents/kody-test.json"
        docs.documents["/agents/kody-test.json"] = {
            "client_id": client_id,
            "client_name": "Metadata Agent",
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
        storage = MemoryStorage()

        async def run() -> tuple[Consent, Any]:
            browser = await signed_in(server_url, owner.username)
            consent = Consent(browser)
            auth = provider(server_url, consent, storage, client_metadata_url=client_id)
            result = await with_mcp(server_url, auth, _whoami)
            await browser.aclose()
            return consent, result

        consent, (_, whoami) = run_unwrapped(run)

    assert docs.hits and docs.hits[0] == "/agents/kody-test.json"
    assert 'data-testid="client-name">Metadata Agent<' in consent.pages[0]
    assert whoami.structured_content["userId"] == owner.stable_user_id
    application = Application.objects.get(client_id=client_id)
    assert application.registration_source == Application.RegistrationSource.CIMD
    assert OAuthGrant.objects.get(user=owner).client_id == client_id


# --- refusals, over plain HTTP --------------------------------------------------------------


def test_a_code_is_used_once(server_url: str, owner: User) -> None:
    client_id = raw.register(server_url)
    verifier, challenge = raw.pkce()
    code = raw.code_from(raw.approve(server_url, owner, client_id, challenge))
    assert raw.exchange(server_url, client_id, code, verifier).status_code == 200
    replay = raw.exchange(server_url, client_id, code, verifier)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"


def test_a_wrong_pkce_verifier_is_refused(server_url: str, owner: User) -> None:
    client_id = raw.register(server_url)
    _, challenge = raw.pkce()
    code = raw.code_from(raw.approve(server_url, owner, client_id, challenge))
    wrong = raw.exchange(server_url, client_id, code, secrets.token_urlsafe(48))
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"


def test_plain_pkce_and_missing_pkce_are_refused(server_url: str, owner: User) -> None:
    client_id = raw.register(server_url)

    async def run() -> list[httpx2.Response]:
        browser = await signed_in(server_url, owner.username)
        plain = await browser.get(
            raw.authorize_url(server_url, client_id, "x" * 43, code_challenge_method="plain")
        )
        query = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT_URI}
        missing = await browser.get(server_url + "/oauth/authorize?" + urlencode(query))
        await browser.aclose()
        return [plain, missing]

    for response in run_unwrapped(run):
        assert response.status_code in (302, 400)
        assert "code=" not in response.headers.get("location", "")


def test_an_unregistered_redirect_uri_is_refused_without_a_redirect(
    server_url: str, owner: User
) -> None:
    client_id = raw.register(server_url)
    _, challenge = raw.pkce()

    async def run() -> httpx2.Response:
        browser = await signed_in(server_url, owner.username)
        url = raw.authorize_url(
            server_url, client_id, challenge, redirect_uri="http://evil.example/cb"
        )
        response = await browser.get(url)
        await browser.aclose()
        return response

    response = run_unwrapped(run)
    assert response.status_code == 400
    assert "location" not in response.headers


def test_loopback_redirect_ports_may_vary(server_url: str, owner: User) -> None:
    client_id = raw.register(server_url)
    _, challenge = raw.pkce()
    location = raw.approve(
        server_url, owner, client_id, challenge, redirect_uri="http://127.0.0.1:40001/callback"
    )
    assert location.startswith("http://127.0.0.1:40001/callback?") and "code=" in location


def test_deny_sends_access_denied_and_grants_nothing(server_url: str, owner: User) -> None:
    client_id = raw.register(server_url)
    _, challenge = raw.pkce()

    async def run() -> str:
        browser = await signed_in(server_url, owner.username)
        consent = Consent(browser, allow=False)
        await consent.redirect_handler(raw.authorize_url(server_url, client_id, challenge))
        await browser.aclose()
        return consent.redirect

    location = run_unwrapped(run)
    assert "error=access_denied" in location and "code=" not in location
    assert not OAuthGrant.objects.filter(user=owner).exists()


def test_another_audience_is_refused(server_url: str, owner: User) -> None:
    client_id = raw.register(server_url)
    _, challenge = raw.pkce()
    location = raw.approve_or_error(
        server_url, owner, client_id, challenge, resource="https://elsewhere.example/mcp"
    )
    assert "error=invalid_target" in location and "code=" not in location

    # A token bound to another resource (as one issued there would be) is refused at /mcp.
    _, tokens = raw.connected(server_url, owner)
    assert initialize(server_url, tokens["access_token"]).status_code == 200
    AccessToken.objects.filter(kind=TokenKind.OAUTH).update(
        audience=["https://elsewhere.example/mcp"]
    )
    assert initialize(server_url, tokens["access_token"]).status_code == 401


def test_oauth_tokens_are_refused_by_the_rest_api(server_url: str, owner: User) -> None:
    _, tokens = raw.connected(server_url, owner)
    headers = {"Authorization": f"Bearer {tokens['access_token']}"}
    assert httpx2.get(server_url + "/api/v1/whoami", headers=headers).status_code == 401


def test_an_expired_access_token_is_refused(server_url: str, owner: User) -> None:
    _, tokens = raw.connected(server_url, owner)
    AccessToken.objects.filter(kind=TokenKind.OAUTH).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert initialize(server_url, tokens["access_token"]).status_code == 401


def test_a_revoked_grant_cuts_the_agent_off(server_url: str, owner: User) -> None:
    client_id, tokens = raw.connected(server_url, owner)
    assert initialize(server_url, tokens["access_token"]).status_code == 200

    grants.revoke_grant(owner, OAuthGrant.objects.get(user=owner).pk)

    assert initialize(server_url, tokens["access_token"]).status_code == 401
    refused = raw.refresh(server_url, client_id, tokens["refresh_token"])
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"


def test_revocation_endpoint_rfc7009(server_url: str, owner: User) -> None:
    client_id, tokens = raw.connected(server_url, owner)
    response = httpx2.post(
        server_url + "/oauth/revoke",
        data={"token": tokens["access_token"], "client_id": client_id},
    )
    assert response.status_code == 200
    assert initialize(server_url, tokens["access_token"]).status_code == 401
    # Revoking the access token also revoked the refresh token bound to it.
    assert raw.refresh(server_url, client_id, tokens["refresh_token"]).status_code == 400


def test_refresh_reuse_inside_the_window_gives_a_sibling_and_after_it_revokes_the_family(
    server_url: str, owner: User
) -> None:
    client_id, tokens = raw.connected(server_url, owner)
    first = raw.refresh(server_url, client_id, tokens["refresh_token"])
    assert first.status_code == 200
    # A second host of the same client presents the just-rotated token: it gets its own pair.
    sibling = raw.refresh(server_url, client_id, tokens["refresh_token"])
    assert sibling.status_code == 200
    assert sibling.json()["access_token"] != first.json()["access_token"]
    for pair in (first.json(), sibling.json()):
        assert initialize(server_url, pair["access_token"]).status_code == 200

    # The window passes (the rotation is moved back past it) and the old token comes again.
    window = timedelta(seconds=settings.KODY_OAUTH_REFRESH_REUSE_SECONDS + 1)
    RefreshToken.objects.filter(revoked__isnull=False).update(revoked=timezone.now() - window)
    reuse = raw.refresh(server_url, client_id, tokens["refresh_token"])
    assert reuse.status_code == 400 and reuse.json()["error"] == "invalid_grant"
    # The whole family is gone: both hosts must sign in again.
    for pair in (first.json(), sibling.json()):
        assert initialize(server_url, pair["access_token"]).status_code == 401
        assert raw.refresh(server_url, client_id, pair["refresh_token"]).status_code == 400
    assert not ToolkitAccessToken.objects.filter(user=owner).exists()


def test_account_deletion_revokes_every_grant_first(
    server_url: str, owner: User, settings: Any
) -> None:
    from apps.accounts.deletion import job

    _, tokens = raw.connected(server_url, owner)
    assert initialize(server_url, tokens["access_token"]).status_code == 200
    settings.KODY_ACTORS_INLINE = True

    deletion = job.run(job.start(owner, requested_by="self"))

    mark = next(step for step in deletion.steps if step["step"] == "mark")
    assert mark["updated"]["oauth_grants_revoked"] == 1
    assert initialize(server_url, tokens["access_token"]).status_code == 401
    assert not OAuthGrant.objects.filter(user_id=owner.pk).exists()
    assert not RefreshToken.objects.filter(user_id=owner.pk).exists()


@pytest.mark.parametrize("bad_id", [1.5, None, {"a": 1}, [1], True])
def test_a_request_with_an_invalid_json_rpc_id_is_an_invalid_request(
    server_url: str, owner: User, bad_id: Any
) -> None:
    _, tokens = raw.connected(server_url, owner)
    headers = {
        "Authorization": f"Bearer {tokens['access_token']}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    body = {"jsonrpc": "2.0", "id": bad_id, "method": "tools/list", "params": {}}
    response = httpx2.post(server_url + "/mcp", json=body, headers=headers, timeout=10)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600
    assert response.json()["id"] is None

    batch = [{"jsonrpc": "2.0", "id": 7, "method": "ping"}, body]
    assert httpx2.post(server_url + "/mcp", json=batch, headers=headers).status_code == 400
    body["id"] = "fine"
    assert httpx2.post(server_url + "/mcp", json=body, headers=headers).status_code == 200


def test_initialize_carries_the_persons_instructions_and_popular_packages(
    server_url: str, owner: User, outsider: User
) -> None:
    from apps.packages.models import AgentPackageConversationUse
    from apps.packages.services.mcp_instructions import set_instructions

    set_instructions(owner.stable_user_id, "Answer in Portuguese.")
    now = timezone.now()
    for conversation in ("c1", "c2"):
        AgentPackageConversationUse.objects.create(
            user_id=owner.stable_user_id, package_id="pkg-weather",
            conversation_id=conversation, first_used_at=now, last_used_at=now,
        )  # fmt: skip
    _, tokens = raw.connected(server_url, owner)

    instructions = initialize(server_url, tokens["access_token"]).json()["result"]["instructions"]

    assert instructions.startswith("Kody acts for the person who owns this token.")
    assert "Answer in Portuguese." in instructions
    assert "pkg-weather" in instructions
    _, theirs = raw.connected(server_url, outsider)
    other = initialize(server_url, theirs["access_token"]).json()["result"]["instructions"]
    assert "Portuguese" not in other and "pkg-weather" not in other
