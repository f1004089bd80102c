"""The OAuth authorization-code flow driven over plain HTTP against a live server, one step per
function (register, consent, exchange, refresh), so a test can break exactly one step."""

from __future__ import annotations

import base64
import hashlib
import secrets
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2

from apps.accounts.models import User
from tests.accounts.oauth_live import REDIRECT_URI, Consent, signed_in
from tests.kernel.test_mcp_live import run_unwrapped


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def register(url: str, redirect_uri: str = REDIRECT_URI) -> str:
    response = httpx2.post(
        url + "/oauth/register",
        json={
            "client_name": "Raw Client",
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_method": "none",
        },
    )
    assert response.status_code == 201, response.text
    return str(response.json()["client_id"])


def authorize_url(url: str, client_id: str, challenge: str, **extra: str) -> str:
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT_URI,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "s1",
        "resource": url + "/mcp",
        **extra,
    }
    return url + "/oauth/authorize?" + urlencode(query)


def approve(url: str, user: User, client_id: str, challenge: str, **extra: str) -> str:
    """Consent over HTTP; returns the redirect the browser is sent to."""

    async def run() -> str:
        browser = await signed_in(url, user.username)
        consent = Consent(browser)
        await consent.redirect_handler(authorize_url(url, client_id, challenge, **extra))
        await browser.aclose()
        return consent.redirect

    return run_unwrapped(run)


def code_from(location: str) -> str:
    return parse_qs(urlsplit(location).query)["code"][0]


def token_request(url: str, **form: str) -> httpx2.Response:
    return httpx2.post(url + "/oauth/token", data=form, timeout=10)


def exchange(url: str, client_id: str, code: str, verifier: str) -> httpx2.Response:
    return token_request(
        url,
        grant_type="authorization_code",
        code=code,
        redirect_uri=REDIRECT_URI,
        client_id=client_id,
        code_verifier=verifier,
        resource=url + "/mcp",
    )


def connected(url: str, user: User) -> tuple[str, dict[str, Any]]:
    client_id = register(url)
    verifier, challenge = pkce()
    tokens = exchange(url, client_id, code_from(approve(url, user, client_id, challenge)), verifier)
    assert tokens.status_code == 200, tokens.text
    return client_id, tokens.json()


def refresh(url: str, client_id: str, refresh_token: str) -> httpx2.Response:
    return token_request(
        url, grant_type="refresh_token", refresh_token=refresh_token, client_id=client_id
    )


def approve_or_error(url: str, user: User, client_id: str, challenge: str, **extra: str) -> str:
    async def run() -> str:
        browser = await signed_in(url, user.username)
        response = await browser.get(authorize_url(url, client_id, challenge, **extra))
        await browser.aclose()
        return response.headers.get("location", "")

    return run_unwrapped(run)
