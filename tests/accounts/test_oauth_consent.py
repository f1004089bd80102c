"""The consent page in-process: sign-in first, remember-this-client, and what is refused."""

from __future__ import annotations

import base64
import hashlib
import html
import re
import secrets
from urllib.parse import unquote, urlencode

import pytest
from django.test import Client

from apps.accounts.models import OAuthGrant, User
from apps.accounts.oauth import grants
from tests.accounts.factories import PASSWORD

pytestmark = pytest.mark.django_db(databases=["default", "audit"])
REDIRECT_URI = "http://127.0.0.1:53682/callback"
HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)"')


def _register(client: Client, redirect_uri: str = REDIRECT_URI) -> str:
    body = {
        "client_name": "Consent Agent",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_method": "none",
    }
    return client.post("/oauth/register", body, content_type="application/json").json()["client_id"]


def _authorize_path(client_id: str, redirect_uri: str = REDIRECT_URI) -> str:
    challenge = base64.urlsafe_b64encode(
        hashlib.sha256(secrets.token_urlsafe(48).encode()).digest()
    )
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "code_challenge": challenge.rstrip(b"=").decode(),
        "code_challenge_method": "S256",
        "state": "st",
    }
    return "/oauth/authorize?" + urlencode(query)


def _fields(page: str) -> dict[str, str]:
    return {name: html.unescape(value) for name, value in HIDDEN.findall(page)}


def test_an_agent_opening_the_page_signed_out_is_sent_through_sign_in_and_back(
    owner: User,
) -> None:
    browser = Client()
    path = _authorize_path(_register(browser))

    first = browser.get(path)
    assert first.status_code == 302 and first.url.startswith("/login?next=")
    assert unquote(first.url.split("next=", 1)[1]) == path

    signed_in = browser.post(
        "/login", {"identifier": owner.username, "password": PASSWORD, "next": path}
    )
    assert signed_in.status_code == 302 and signed_in.url == path
    page = browser.get(path)
    assert page.status_code == 200 and "Consent Agent" in page.content.decode()


def test_remember_skips_the_page_until_the_grant_is_revoked(
    owner: User, owner_client: Client
) -> None:
    client_id = _register(owner_client)
    page = owner_client.get(_authorize_path(client_id)).content.decode()
    answer = owner_client.post(
        _authorize_path(client_id), {**_fields(page), "allow": "on", "remember": "on"}
    )
    assert answer.status_code == 302 and "code=" in answer.url
    grant = OAuthGrant.objects.get(user=owner)
    assert grant.remember is True

    again = owner_client.get(_authorize_path(client_id))
    assert again.status_code == 302 and again.url.startswith(REDIRECT_URI + "?code=")

    grants.revoke_grant(owner, grant.pk)
    asked = owner_client.get(_authorize_path(client_id))
    assert asked.status_code == 200 and "Remember this agent" in asked.content.decode()


def test_without_remember_the_page_asks_every_time(owner: User, owner_client: Client) -> None:
    client_id = _register(owner_client)
    page = owner_client.get(_authorize_path(client_id)).content.decode()
    owner_client.post(_authorize_path(client_id), {**_fields(page), "allow": "on"})
    assert owner_client.get(_authorize_path(client_id)).status_code == 200


def test_another_persons_remembered_client_still_asks_me(
    owner: User, owner_client: Client, outsider_client: Client
) -> None:
    client_id = _register(owner_client)
    page = owner_client.get(_authorize_path(client_id)).content.decode()
    owner_client.post(
        _authorize_path(client_id), {**_fields(page), "allow": "on", "remember": "on"}
    )
    assert outsider_client.get(_authorize_path(client_id)).status_code == 200


def test_an_unknown_client_gets_an_error_page_not_a_redirect(owner_client: Client) -> None:
    response = owner_client.get(_authorize_path("no-such-client"))
    assert response.status_code == 400
    assert "location" not in response.headers


def test_a_plain_http_redirect_off_the_loopback_is_refused_without_a_redirect(
    owner_client: Client,
) -> None:
    # http is allowed for a native client's local listener only; anywhere else the code
    # would travel in the clear.
    cleartext = "http://agent.example/callback"
    client_id = _register(owner_client, cleartext)
    response = owner_client.get(_authorize_path(client_id, cleartext))
    assert response.status_code == 400
    assert "location" not in response.headers
    assert not OAuthGrant.objects.exists()
