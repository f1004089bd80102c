"""The guarded HTTP clients: outside URLs reach only public addresses, on every hop."""

from __future__ import annotations

import base64
import hashlib
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest

from kody.fetch import FetchRefused
from kody.netguard import check_url, guarded_async_client, guarded_session
from tests.fakes.oauth_provider import OAuthProviderFake


@pytest.fixture
def provider(settings):
    settings.KODY_FETCH_ALLOW_LOOPBACK = True
    with OAuthProviderFake() as fake:
        fake.add_client("public-app", None, ["http://127.0.0.1:9/callback"])
        yield fake


def _challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def test_a_pkce_flow_against_the_fake_goes_through_the_guarded_session(provider):
    session = guarded_session()
    verifier = "v" * 50
    start = session.get(
        provider.url("/authorize"),
        params={
            "response_type": "code",
            "client_id": "public-app",
            "redirect_uri": "http://127.0.0.1:9/callback",
            "state": "st-1",
            "code_challenge": _challenge(verifier),
            "code_challenge_method": "S256",
        },
        allow_redirects=False,
    )
    assert start.status_code == 302
    query = parse_qs(urlsplit(start.headers["location"]).query)
    assert query["state"] == ["st-1"]
    token = session.post(
        provider.url("/token"),
        data={
            "grant_type": "authorization_code",
            "code": query["code"][0],
            "redirect_uri": "http://127.0.0.1:9/callback",
            "client_id": "public-app",
            "code_verifier": verifier,
        },
    )
    assert token.status_code == 200, token.text
    pair = token.json()
    assert provider.is_valid_access_token(pair["access_token"])
    refreshed = session.post(
        provider.url("/token"),
        data={
            "grant_type": "refresh_token",
            "refresh_token": pair["refresh_token"],
            "client_id": "public-app",
        },
    )
    assert refreshed.status_code == 200
    again = session.post(
        provider.url("/token"),
        data={
            "grant_type": "refresh_token",
            "refresh_token": pair["refresh_token"],
            "client_id": "public-app",
        },
    )
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    assert provider.refresh_uses[pair["refresh_token"]] == 2


def test_a_wrong_pkce_verifier_is_refused_by_the_fake(provider):
    session = guarded_session()
    start = session.get(
        provider.url("/authorize"),
        params={
            "response_type": "code",
            "client_id": "public-app",
            "redirect_uri": "http://127.0.0.1:9/callback",
            "code_challenge": _challenge("right" * 10),
            "code_challenge_method": "S256",
        },
        allow_redirects=False,
    )
    code = parse_qs(urlsplit(start.headers["location"]).query)["code"][0]
    answer = session.post(
        provider.url("/token"),
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": "http://127.0.0.1:9/callback",
            "client_id": "public-app",
            "code_verifier": "wrong" * 10,
        },
    )
    assert answer.status_code == 400


def test_a_redirect_to_a_private_address_is_refused_on_that_hop(provider):
    provider.add_client("bouncer", None, ["https://10.20.30.40/callback"])
    session = guarded_session()
    with pytest.raises(FetchRefused):
        session.get(
            provider.url("/authorize"),
            params={
                "response_type": "code",
                "client_id": "bouncer",
                "redirect_uri": "https://10.20.30.40/callback",
            },
        )


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/token",
        "https://10.0.0.8/token",
        "https://169.254.169.254/latest/meta-data",
        "http://example.com/token",
        "https://user:pw@example.com/token",
        "file:///etc/passwd",
    ],
)
def test_private_plain_and_credentialed_urls_are_refused(settings, url):
    settings.KODY_FETCH_ALLOW_LOOPBACK = False
    with pytest.raises(FetchRefused):
        guarded_session().get(url)


def test_plain_http_is_allowed_only_to_loopback_and_only_in_tests(settings):
    settings.KODY_FETCH_ALLOW_LOOPBACK = True
    check_url("http://127.0.0.1:8000/x")
    with pytest.raises(FetchRefused):
        check_url("http://93.184.215.14/x")
    settings.KODY_FETCH_ALLOW_LOOPBACK = False
    with pytest.raises(FetchRefused):
        check_url("http://127.0.0.1:8000/x")


def test_the_async_client_reaches_an_allowed_server_and_streams(provider):
    async def go() -> dict:
        async with guarded_async_client() as client:
            response = await client.get(provider.url("/.well-known/oauth-authorization-server"))
            return response.json()

    assert anyio.run(go)["token_endpoint"] == provider.url("/token")


def test_the_async_client_refuses_loopback_when_not_allowed(provider, settings):
    settings.KODY_FETCH_ALLOW_LOOPBACK = False

    async def go() -> None:
        async with guarded_async_client() as client:
            await client.get(provider.url("/api/x"))

    with pytest.raises(httpx2.ConnectError):
        anyio.run(go)
    assert provider.api_calls == []


def test_the_async_client_refuses_a_private_address_at_connect(settings):
    settings.KODY_FETCH_ALLOW_LOOPBACK = True

    async def go() -> None:
        async with guarded_async_client(timeout=httpx2.Timeout(2.0)) as client:
            await client.get("https://10.0.0.8/mcp")

    with pytest.raises(httpx2.ConnectError, match="non-public"):
        anyio.run(go)
