"""Social sign-in tests: the provider settings pointing at the local fake, and a browser's
round trip (Kody → provider's authorize page → Kody's callback) with the Django test client."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import requests
from django.http import HttpResponse
from django.test import Client

from tests.fakes.oauth_provider import OAuthProviderFake

CLIENT_ID, CLIENT_SECRET = "kody-social", "social-s3cret"


def provider_settings(fake: OAuthProviderFake, *, secret: str = CLIENT_SECRET) -> dict[str, Any]:
    common = {"client_id": CLIENT_ID, "client_secret": secret}
    return {
        "github": {
            **common,
            "label": "GitHub",
            "authorize_url": fake.url("/authorize"),
            "token_url": fake.url("/token"),
            "api_url": fake.base_url,
            "scope": "read:user user:email",
        },
        "google": {
            **common,
            "label": "Google",
            "authorize_url": fake.url("/authorize"),
            "token_url": fake.url("/token"),
            "userinfo_url": fake.url("/userinfo"),
            "scope": "openid email profile",
        },
    }


def authorize(start: HttpResponse, fake: OAuthProviderFake) -> str:
    """Follow Kody's redirect to the provider as a browser would; the callback path it sends
    the browser back to."""
    assert start.status_code == 302, start.content.decode()[:300]
    location = start["Location"]
    assert location.startswith(fake.url("/authorize")), location
    query = parse_qs(urlsplit(location).query)
    assert query["code_challenge_method"] == ["S256"] and query["code_challenge"][0]
    assert len(query["state"][0]) >= 32
    answer = requests.get(location, allow_redirects=False, timeout=5)
    assert answer.status_code == 302, answer.text
    back = urlsplit(answer.headers["Location"])
    return f"{back.path}?{back.query}"


def round_trip(client: Client, fake: OAuthProviderFake, name: str = "github", **kw: Any) -> Any:
    """Sign in with the provider (GET start) and return Kody's callback response."""
    return client.get(authorize(client.get(f"/auth/{name}", kw), fake))


def link_round_trip(client: Client, fake: OAuthProviderFake, name: str = "github") -> Any:
    """Link from the Connections page (POST start) and return Kody's callback response."""
    return client.get(authorize(client.post(f"/auth/{name}"), fake))


def signed_in_as(client: Client) -> Any:
    from apps.accounts.models import User

    user_id = client.session.get("_auth_user_id")
    return User.objects.get(pk=user_id) if user_id else None
